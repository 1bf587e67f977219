"""Request rate limits of the agent API, with Flask-Limiter.

Every request to an agent endpoint counts against one sliding one-minute window (Flask-Limiter's
``moving-window`` strategy, a true sliding log): the API key's when the key is valid (60 a
minute by default), the client address's otherwise (30 a minute by default), so guessing keys
stays slow whichever keys are tried, and a valid key's traffic never counts against its address
or other keys. The key is authenticated before the limit is applied (``rate_limit_identity``);
the view's own authorization reuses that result.

With ``REDIS_URL`` set, counts live in Redis and every process shares them, through limits'
own ``RedisStorage`` (its moving-window script to count, another to read the window for the
headers). If Redis goes away, Flask-Limiter falls back to per-process in-memory counts
(logging the failure) and returns to Redis once it answers again: the API keeps answering
rather than refusing or failing requests.
A storage error after the view has run (while adding the headers) is swallowed: the request's
work is done and it gets its real answer. Without ``REDIS_URL`` the counts live in memory, and
only one process may serve a database (``memory_counts``).
"""

from __future__ import annotations

import logging
import math
import time

from flask import Flask, Response, current_app, g, request
from flask.typing import ResponseReturnValue
from flask_limiter import Limiter, RateLimitExceeded
from limits import RateLimitItem

from app.api.auth import authentication
from app.api.memory_counts import NOT_OWNER_MESSAGE, owns_memory_counts
from app.config import API_PREFIX, settings, settings_of
from app.counters import RATE_LIMITED
from app.errors import envelope


def rate_limit_identity() -> str:
    """The bucket a request counts against: its API key, or its client address."""
    api_key = authentication().api_key
    return f"key:{api_key.id}" if api_key is not None else f"addr:{request.remote_addr}"


def current_limit() -> str:
    """The limit of the bucket ``rate_limit_identity`` chooses. Outside the agent API, which is
    exempt, no key is looked up (health checks must not touch the database for it)."""
    if not is_not_agent_api() and authentication().api_key is not None:
        return settings().rate_limit
    return settings().rate_limit_unauthenticated


AGENT_PATHS = API_PREFIX + "/calendar/"


def is_not_agent_api() -> bool:
    """Documentation and anything outside the agent endpoints is not limited."""
    return not request.path.startswith(AGENT_PATHS)


def request_identity() -> str:
    """The endpoint, as Flask-Limiter's default; agent paths that match no operation (a 404 or
    405 from routing) get a name too, so they are counted and carry the headers like any
    other agent request instead of being skipped for having no endpoint."""
    if request.endpoint is None and request.path.startswith(AGENT_PATHS):
        return "agent-api-unmatched"
    return request.endpoint or ""


def describe(limit: RateLimitItem) -> str:
    """``60/minute`` → ``60 requests per minute`` (for the 429 message)."""
    unit = limit.GRANULARITY.name
    if limit.multiples != 1:
        unit = f"{limit.multiples} {unit}s"
    return f"{limit.amount} requests per {unit}"


def handle_rate_limit_exceeded(error: RateLimitExceeded) -> ResponseReturnValue:
    """429 in the envelope; Flask-Limiter adds ``Retry-After`` and the X-RateLimit headers."""
    RATE_LIMITED.labels("key" if authentication().api_key is not None else "address").inc()
    return envelope(429, f"Rate limit exceeded: {describe(error.limit.limit)}")


def _retry_after_only_when_limited(response: Response) -> Response:
    """Flask-Limiter puts its ``Retry-After`` on every answer; it means "wait" only on a 429.
    A 503 keeps the wait its error handler chose (``g.retry_after``)."""
    if response.status_code == 503 and "retry_after" in g:
        response.headers["Retry-After"] = g.retry_after
    elif response.status_code == 429:
        response.headers["Retry-After"] = str(_seconds_until_reset(response))
    else:
        response.headers.pop("Retry-After", None)
    return response


def _seconds_until_reset(response: Response) -> int:
    """Whole seconds until the window lets a request through again: rounded up, at least 1.
    Flask-Limiter truncates (``int(reset - now)`` from a reset already rounded), which says 0
    in the last fraction of a second the window is still full, so a client that waits what
    it was told is refused again. The exact reset is the window the limiter already read for
    the headers (no second look at the storage)."""
    for limiter in current_app.extensions.get("limiter", ()):  # the one register_rate_limits made
        if (request_limit := limiter.current_limit) is not None:
            return max(1, math.ceil(request_limit.window.reset_time - time.time()))
    return max(1, int(response.headers.get("Retry-After") or 1))


def _refuse_unless_owner_of_memory_counts() -> ResponseReturnValue | None:
    """Before the limiter counts in memory: only the one process that owns the database's
    counts may serve agent requests."""
    if is_not_agent_api() or owns_memory_counts():
        return None
    return envelope(503, NOT_OWNER_MESSAGE)


def _authenticate_before_counting() -> None:
    """Authenticate agent requests before the limiter runs. The limiter swallows its key
    function's errors (as storage errors), so a database outage met while reading the key
    there would be hidden and meet the view again on a failed session; met here, it is
    answered at once (a 503, ``app.errors``)."""
    if not is_not_agent_api():
        authentication()


# What Flask-Limiter's log lines say (its logger, ``flask-limiter``, is the only sign it gives
# of its storage failing and recovering: no callback, no public state). Read by their words, the
# one reliance of this module on Flask-Limiter's insides;
# tests/conventions/test_library_internals.py fails when the pinned Flask-Limiter changes the
# code that logs them or stops logging them.
OUTAGE_STARTS = "Rate limit storage unreachable"  # "… - falling back to in-memory storage"
OUTAGE_ENDS = "Rate limit storage recovered"
ERROR_SWALLOWED = "Swallowing error"  # "Failed to rate limit. Swallowing error", and others


class OncePerOutage(logging.Filter):
    """Flask-Limiter logs every storage error it swallows, with a traceback, on every request
    of an outage. Its two outage lines ("… unreachable …" when it falls back to memory, "…
    recovered" when it returns) say it all, so between them swallowed errors are dropped: an
    outage reads as one line when it starts and one when it ends. A swallowed error outside
    an announced outage is kept (once, until the next recovery)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_outage = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if OUTAGE_ENDS in message:
            self.in_outage = False
        elif OUTAGE_STARTS in message:
            self.in_outage = True
        elif ERROR_SWALLOWED in message:
            if self.in_outage:
                return False
            self.in_outage = True
        return True


LIMITER_LOG = logging.getLogger("flask-limiter")
_once_per_outage = OncePerOutage()


def register_rate_limits(app: Flask) -> Limiter:
    configured = settings_of(app)
    redis_url = configured.redis_url
    app.config.setdefault("RATELIMIT_KEY_PREFIX", configured.ratelimit_key_prefix)
    app.config.setdefault("RATELIMIT_STORAGE_URI", redis_url or "memory://")
    app.config.setdefault("RATELIMIT_STRATEGY", "moving-window")
    app.config.setdefault("RATELIMIT_HEADERS_ENABLED", True)
    app.config.setdefault("RATELIMIT_REQUEST_IDENTIFIER", request_identity)
    # A storage failure Flask-Limiter cannot fall back from (e.g. reading the window for the
    # headers after the view committed) must not turn a finished request into a 500.
    app.config.setdefault("RATELIMIT_SWALLOW_ERRORS", True)
    if _once_per_outage not in LIMITER_LOG.filters:
        LIMITER_LOG.addFilter(_once_per_outage)
    if not redis_url:
        app.before_request(_refuse_unless_owner_of_memory_counts)
    # Before the limiter's own before-request function, which is registered by init_app.
    app.before_request(_authenticate_before_counting)
    if redis_url:
        app.config.setdefault("RATELIMIT_IN_MEMORY_FALLBACK_ENABLED", True)
        # Fail fast when Redis is unreachable or frozen, so the fallback costs at most
        # ``REDIS_TIMEOUT_S``, not seconds (``app.deadlines``). One attempt: redis-py's clients
        # made from a URL do not retry.
        timeout = configured.redis_timeout_s
        app.config.setdefault(
            "RATELIMIT_STORAGE_OPTIONS",
            {"socket_timeout": timeout, "socket_connect_timeout": timeout},
        )
    # Registered before the limiter, so it runs after the limiter has added its headers
    # (Flask runs after-request functions in reverse order).
    app.after_request(_retry_after_only_when_limited)
    limiter = Limiter(
        key_func=rate_limit_identity,
        application_limits=[current_limit],
        application_limits_exempt_when=is_not_agent_api,
    )
    limiter.init_app(app)
    app.register_error_handler(RateLimitExceeded, handle_rate_limit_exceeded)
    return limiter
