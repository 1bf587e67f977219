"""Where Google and Microsoft deliver their change notifications (``PUBLIC_URL`` + the paths
below): thin views that check a notification's size, hand it to the push service
(``app.services.integrations.calendars.push``), commit, and answer at once; the sync it asks
for is handed to the worker after the commit. No provider is called here.

Every well-formed notification is answered alike (Google: 200; Graph: 202), refused or not, so
a forger learns nothing from the answer; only ``/metrics`` and the log tell them apart. Graph's
validation handshake (``?validationToken=…``) is echoed as ``text/plain`` at once. Bodies are
limited to ``PUSH_MAX_BODY_BYTES`` and each client address to ``PUSH_RATE_LIMIT``.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, Response, abort, request

from app.config import settings_of
from app.extensions import db
from app.models.types import utcnow
from app.services.integrations.calendars.push import (
    GOOGLE_PATH,
    MICROSOFT_LIFECYCLE_PATH,
    MICROSOFT_PATH,
    count_notified,
    google_notification,
    microsoft_lifecycle,
    microsoft_notifications,
)

# Graph batches notifications; a few hundred of them fit easily.
PUSH_MAX_BODY_BYTES = 256 * 1024
# Graph's validation tokens are short opaque strings; anything longer is not one.
VALIDATION_TOKEN_MAX = 1024
TOO_LARGE = f"Request body too large (limit: {PUSH_MAX_BODY_BYTES // 1024} KiB)"

push = Blueprint("push", __name__)


def _plain(text: str, status: int = 200) -> Response:
    response = Response(text, status=status, mimetype="text/plain")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def _body() -> bytes:
    """The request's body, or a 413 naming this endpoint's own limit (not the API's)."""
    if (request.content_length or 0) > PUSH_MAX_BODY_BYTES:
        abort(_plain(TOO_LARGE, 413))
    data = request.get_data(cache=True)
    if len(data) > PUSH_MAX_BODY_BYTES:
        abort(_plain(TOO_LARGE, 413))
    return data


@push.post(GOOGLE_PATH)
def google() -> Response:
    """One Google Calendar message: everything is in its ``X-Goog-*`` headers."""
    _body()
    headers = request.headers
    if not headers.get("X-Goog-Channel-ID") or not headers.get("X-Goog-Resource-State"):
        return _plain("", 400)
    notified = google_notification(
        headers.get("X-Goog-Channel-ID"),
        headers.get("X-Goog-Channel-Token"),
        headers.get("X-Goog-Resource-ID"),
        headers.get("X-Goog-Resource-State"),
        utcnow(),
    )
    db.session.commit()
    count_notified("google", [notified])
    return _plain("")


@push.post(MICROSOFT_PATH)
def microsoft() -> Response:
    """Graph's change notifications, or its validation request when a subscription is made."""
    return _graph(microsoft_notifications)


@push.post(MICROSOFT_LIFECYCLE_PATH)
def microsoft_lifecycle_events() -> Response:
    """Graph's lifecycle notifications (and the validation request of the lifecycle URL)."""
    return _graph(microsoft_lifecycle)


def _graph(handle: Any) -> Response:
    token = request.args.get("validationToken")
    if token is not None:
        if not token or len(token) > VALIDATION_TOKEN_MAX:
            return _plain("", 400)
        return _plain(token)
    _body()
    try:
        payload = request.get_json(silent=True)
    except RecursionError:  # nested deeper than the parser goes: not a notification
        payload = None
    values = payload.get("value") if isinstance(payload, dict) else None
    if not isinstance(values, list):
        return _plain("", 400)
    notified = handle(values, utcnow())
    db.session.commit()
    count_notified("microsoft", notified)
    return _plain("", 202)


def register_push(app: Flask, limiter: Any) -> None:
    """The notification endpoints, limited per client address: one count across the three
    (a shared limit), not one each."""
    limit = settings_of(app).push_rate_limit
    limiter.shared_limit(
        lambda: limit, scope="push-per-address", key_func=lambda: f"push:{request.remote_addr}"
    )(push)
    app.register_blueprint(push)
