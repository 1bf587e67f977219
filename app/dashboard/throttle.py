"""Sign-in throttling that slows the guesser down without locking the owner out.

Failed sign-ins are counted through the app's Flask-Limiter (its storage: Redis when
configured), in three moving windows:

* per address (``SIGN_IN_LIMIT_PER_ADDRESS``, 20 in 10 minutes): a client guessing at many
  accounts is refused, whatever account it names next;
* per address and account (``SIGN_IN_LIMIT_PER_ADDRESS_ACCOUNT``, 5 in 10 minutes): a client
  guessing one account's password is refused for that account;
* per account (``SIGN_IN_LIMIT_PER_ACCOUNT``, 100 in an hour): the ceiling against guessing
  spread over many addresses. Over it, addresses that have been failing are refused for that
  account; an address with no failed sign-in in its window still has its password checked.

So the right password from an address that has not been failing is never refused: the owner
signing in from their own machine gets in while someone else is guessing at their account. A
refused attempt is not checked at all (no password hashing for the guesser's benefit) and is
not counted again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import current_app
from limits import RateLimitItem, parse
from limits.strategies import RateLimiter

log = logging.getLogger(__name__)

PER_ADDRESS = "20/10 minutes"
PER_ADDRESS_ACCOUNT = "5/10 minutes"
PER_ACCOUNT = "100/hour"

_NAMESPACE = "sign-in"


@dataclass(frozen=True)
class _Limits:
    strategy: RateLimiter
    per_address: RateLimitItem
    per_address_account: RateLimitItem
    per_account: RateLimitItem
    # The deployment's key prefix (``RATELIMIT_KEY_PREFIX``), which Flask-Limiter puts on its own
    # keys only: deployments sharing one Redis keep their sign-in counts apart too.
    namespace: str


def _limits() -> _Limits:
    (limiter,) = current_app.extensions["limiter"]
    config = current_app.config
    return _Limits(
        limiter.limiter,
        parse(config.get("SIGN_IN_LIMIT_PER_ADDRESS", PER_ADDRESS)),
        parse(config.get("SIGN_IN_LIMIT_PER_ADDRESS_ACCOUNT", PER_ADDRESS_ACCOUNT)),
        parse(config.get("SIGN_IN_LIMIT_PER_ACCOUNT", PER_ACCOUNT)),
        f"{config.get('RATELIMIT_KEY_PREFIX', '')}{_NAMESPACE}",
    )


def _has_been_failing(limits: _Limits, address: str) -> bool:
    stats = limits.strategy.get_window_stats(
        limits.per_address, limits.namespace, "address", address
    )
    return stats.remaining < limits.per_address.amount


def sign_in_allowed(address: str, email: str) -> bool:
    """Whether to check this attempt's password at all."""
    limits = _limits()
    strategy = limits.strategy
    try:
        if not strategy.test(limits.per_address, limits.namespace, "address", address):
            return False
        pair = (limits.namespace, "address-account", address, email)
        if not strategy.test(limits.per_address_account, *pair):
            return False
        if not strategy.test(limits.per_account, limits.namespace, "account", email):
            return not _has_been_failing(limits, address)
        return True
    except Exception:  # the store away: signing in still works, unthrottled meanwhile
        log.warning("sign-in throttle store unreachable; not throttling", exc_info=True)
        return True


def count_failed_sign_in(address: str, email: str) -> None:
    limits = _limits()
    strategy = limits.strategy
    try:
        strategy.hit(limits.per_address, limits.namespace, "address", address)
        strategy.hit(
            limits.per_address_account, limits.namespace, "address-account", address, email
        )
        strategy.hit(limits.per_account, limits.namespace, "account", email)
    except Exception:
        log.warning("sign-in throttle store unreachable; failure not counted", exc_info=True)
