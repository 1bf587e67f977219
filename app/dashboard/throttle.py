"""Sign-in throttling, through the app's Flask-Limiter (its storage: Redis when configured):
failed attempts are counted per address and per account, and once either is over its limit
further attempts are refused without checking the password."""

from __future__ import annotations

import logging

from flask import current_app
from limits import parse

log = logging.getLogger(__name__)

PER_ADDRESS = "20/10 minutes"
PER_ACCOUNT = "5/10 minutes"


def _limits():
    (limiter,) = current_app.extensions["limiter"]
    address = parse(current_app.config.get("SIGN_IN_LIMIT_PER_ADDRESS", PER_ADDRESS))
    account = parse(current_app.config.get("SIGN_IN_LIMIT_PER_ACCOUNT", PER_ACCOUNT))
    return limiter.limiter, address, account


def sign_in_allowed(address: str, email: str) -> bool:
    strategy, per_address, per_account = _limits()
    try:
        return strategy.test(per_address, "sign-in", "address", address) and strategy.test(
            per_account, "sign-in", "account", email
        )
    except Exception:  # the store away: signing in still works, unthrottled meanwhile
        log.warning("sign-in throttle store unreachable; not throttling", exc_info=True)
        return True


def count_failed_sign_in(address: str, email: str) -> None:
    strategy, per_address, per_account = _limits()
    try:
        strategy.hit(per_address, "sign-in", "address", address)
        strategy.hit(per_account, "sign-in", "account", email)
    except Exception:
        log.warning("sign-in throttle store unreachable; failure not counted", exc_info=True)
