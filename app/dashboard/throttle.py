"""Sign-in throttling that slows the guesser down without locking the owner out, and the same
throttle on asking for a password-reset link.

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

Asking for a password-reset link (``/forgot-password``) is throttled the same way, in windows
of its own (a person who forgot their password has usually failed to sign in first): every
request counts, whether or not the address belongs to an account, so being refused says
nothing about the account either (``FORGOT_PASSWORD_LIMIT_PER_ADDRESS``, 20 in 10 minutes;
``FORGOT_PASSWORD_LIMIT_PER_ADDRESS_ACCOUNT``, 5 in 10 minutes;
``FORGOT_PASSWORD_LIMIT_PER_ACCOUNT``, 10 in an hour: each request mails the account's owner).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import current_app
from limits import RateLimitItem, parse
from limits.strategies import RateLimiter

from app.config import settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Counted:
    """What is counted: its keys' namespace, and the settings naming its three windows."""

    namespace: str
    settings: str  # the settings' prefix: sign_in_limit, forgot_password_limit (app.config)


SIGN_IN = _Counted("sign-in", "sign_in_limit")
RESET_REQUESTS = _Counted("forgot-password", "forgot_password_limit")


@dataclass(frozen=True)
class _Limits:
    strategy: RateLimiter
    per_address: RateLimitItem
    per_address_account: RateLimitItem
    per_account: RateLimitItem
    # The deployment's key prefix (``RATELIMIT_KEY_PREFIX``), which Flask-Limiter puts on its own
    # keys only: deployments sharing one Redis keep their sign-in counts apart too.
    namespace: str


def _limits(counted: _Counted) -> _Limits:
    (limiter,) = current_app.extensions["limiter"]
    configured = settings()
    prefix = counted.settings
    return _Limits(
        limiter.limiter,
        parse(getattr(configured, f"{prefix}_per_address")),
        parse(getattr(configured, f"{prefix}_per_address_account")),
        parse(getattr(configured, f"{prefix}_per_account")),
        f"{configured.ratelimit_key_prefix}{counted.namespace}",
    )


def _has_been_failing(limits: _Limits, address: str) -> bool:
    stats = limits.strategy.get_window_stats(
        limits.per_address, limits.namespace, "address", address
    )
    return stats.remaining < limits.per_address.amount


def _allowed(counted: _Counted, address: str, email: str) -> bool:
    limits = _limits(counted)
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
        log.warning(
            "%s throttle store unreachable; not throttling", counted.namespace, exc_info=True
        )
        return True


def _count(counted: _Counted, address: str, email: str) -> None:
    limits = _limits(counted)
    strategy = limits.strategy
    try:
        strategy.hit(limits.per_address, limits.namespace, "address", address)
        strategy.hit(
            limits.per_address_account, limits.namespace, "address-account", address, email
        )
        strategy.hit(limits.per_account, limits.namespace, "account", email)
    except Exception:
        log.warning("%s throttle store unreachable; not counted", counted.namespace, exc_info=True)


def sign_in_allowed(address: str, email: str) -> bool:
    """Whether to check this attempt's password at all."""
    return _allowed(SIGN_IN, address, email)


def count_failed_sign_in(address: str, email: str) -> None:
    _count(SIGN_IN, address, email)


def reset_request_allowed(address: str, email: str) -> bool:
    """Whether to take this request for a password-reset link at all."""
    return _allowed(RESET_REQUESTS, address, email)


def count_reset_request(address: str, email: str) -> None:
    _count(RESET_REQUESTS, address, email)
