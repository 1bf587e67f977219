"""Structured logs: one JSON object a line on stderr, each carrying the request id of the
request it was written in, and never a secret.

Request ids: a request's id is its ``X-Request-Id`` when the client (or a proxy in front) sent a
usable one, else a new one; it is echoed in the response's ``X-Request-Id`` and written with
every log line of the request (an error's traceback included), so a client quoting it leads
to the lines. gunicorn's access log (``gunicorn.conf.py``) carries it too.

Secrets: API keys, webhook secrets, bearer tokens, invitation and password-reset links and
``password=`` values are masked in every line, whoever wrote it, as a last line of defence
(nothing here logs them on purpose).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from flask import Flask, Response, g, has_request_context, request
from pythonjsonlogger.json import JsonFormatter

from app.secret_paths import SECRET_IN_PATH

REQUEST_ID_HEADER = "X-Request-Id"
_USABLE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

_SECRETS = (
    (re.compile(r"cbk_[A-Za-z0-9_-]+"), "cbk_…"),
    (re.compile(r"whsec_[A-Za-z0-9+/=]+"), "whsec_…"),
    (re.compile(r"(?i)(bearer\s+)\S+"), r"\1…"),
    (SECRET_IN_PATH, r"\1…"),
    (re.compile(r"(?i)(password[\"']?\s*[=:]\s*[\"']?)[^\s\"',&]+"), r"\1…"),
)


def masked(text: str) -> str:
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class RequestContext(logging.Filter):
    """Adds ``request_id`` to every record (``None`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = g.get("request_id") if has_request_context() else None
        return True


class SecretMask(logging.Filter):
    """Masks secrets in the message (``MaskedJsonFormatter`` masks tracebacks)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if masked(message) != message:
            record.msg, record.args = masked(message), None
        return True


class MaskedJsonFormatter(JsonFormatter):
    def formatException(self, ei: Any) -> str:
        formatted = super().formatException(ei)
        assert isinstance(formatted, str)  # a list only with exc_info_as_array, never set here
        return masked(formatted)


def json_log_handler() -> logging.Handler:
    handler = logging.StreamHandler()
    handler.setFormatter(
        MaskedJsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )
    )
    handler.addFilter(RequestContext())
    handler.addFilter(SecretMask())
    return handler


def configure_logging() -> None:
    """INFO and above as JSON lines on stderr, unless the process set logging up itself
    (pytest, a ``--log-config``): without a handler the extensions' lines, such as the rate
    limiter's "storage unreachable"/"recovered", would reach no log at all under gunicorn."""
    root = logging.getLogger()
    if root.handlers:
        return
    root.addHandler(json_log_handler())
    root.setLevel(logging.INFO)


def _assign_request_id() -> None:
    sent = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = sent if _USABLE_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex


def _echo_request_id(response: Response) -> Response:
    if "request_id" in g:
        response.headers[REQUEST_ID_HEADER] = g.request_id
    return response


def register_request_ids(app: Flask) -> None:
    """Registered first, so every other before-request function (and its log lines) runs with
    the id."""
    app.before_request(_assign_request_id)
    app.after_request(_echo_request_id)
