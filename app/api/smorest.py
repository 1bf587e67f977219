"""flask-smorest, subclassed once: the error envelope in the OpenAPI document, validation
failures as 400, and the API-key decorator with its documented 401/403 answers."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import flask_smorest
import marshmallow as ma
from flask import Flask, Request
from flask_smorest import abort
from webargs.core import missing, parse_json
from webargs.flaskparser import FlaskParser, is_json_request
from werkzeug.routing import IntegerConverter

from app.api import examples
from app.api.auth import authorize
from app.errors import handle_http_exception
from app.models import Permission
from app.models.types import MAX_ID
from app.representations import SlotSchema
from app.services.common.errors import ErrorCode
from app.validation import InstantField, describe_errors

# Ids are PostgreSQL ``integer`` columns: larger values cannot name anything.


class ErrorSchema(ma.Schema):
    statusCode = ma.fields.Integer(
        required=True,
        validate=ma.validate.Range(min=400, max=599),
        metadata={"description": "HTTP status code"},
    )
    message = ma.fields.String(
        required=True,
        validate=ma.validate.Length(min=1),
        metadata={"description": "What went wrong"},
    )
    code = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf([str(c) for c in ErrorCode]),
        metadata={
            "description": "The cause, as a stable name to act on (the message may be reworded; "
            "the code is not). The codes and their causes: this document's description."
        },
    )
    errors = ma.fields.Dict(
        keys=ma.fields.String(),
        values=ma.fields.List(
            ma.fields.String(validate=ma.validate.Length(min=1)),
            validate=ma.validate.Length(min=1),
        ),
        metadata={"description": "Validation problems by field path"},
    )
    suggestedSlots = ma.fields.List(
        ma.fields.Nested(SlotSchema),
        validate=ma.validate.Length(max=5),
        metadata={
            "description": "With a write refused for its time (codes slot_taken, slot_held, "
            "blocked_time, external_busy, host_unavailable, outside_hours, minimum_notice, "
            "beyond_horizon): up to "
            "5 open slots of the same event type and length nearest to the start asked for "
            "(the same day first, nearest first; then the following days; then the preceding "
            "days), open at the moment of the answer. Empty when none is open."
        },
    )


class IdConverter(IntegerConverter):
    """Integer path ids within the id columns' range: larger ones cannot exist, so they are a
    plain 404 instead of a database error."""

    def __init__(self, map: Any) -> None:
        super().__init__(map, min=1, max=MAX_ID)


def _id_parameter_schema(converter: IdConverter) -> dict[str, Any]:
    return {"type": "integer", "format": "int32", "minimum": 1, "maximum": MAX_ID}


def _cut_at_the_size_limit(req: Request, body: bytes) -> bool:
    """Whether a body sent without ``Content-Length`` (chunked) went on past the size limit.

    Werkzeug answers 413 up front when ``Content-Length`` is over the limit, but a chunked
    body it silently cuts at the limit: one more byte from the server's stream tells a body
    that ended there from one that was cut.
    """
    limit = req.max_content_length
    return (
        req.content_length is None
        and limit is not None
        and len(body) >= limit
        and bool(req.environ["wsgi.input"].read(1))
    )


class ApiParser(FlaskParser):
    """webargs' Flask parser, strict about what it accepts: every failure is a 400 with the
    envelope, never webargs' 422 and never an exception that escapes as a 500."""

    DEFAULT_VALIDATION_STATUS = 400

    def load_json(self, req: Request, schema: ma.Schema) -> Any:
        """The body as a JSON object, or ``missing`` for a bodiless GET or DELETE. webargs'
        public ``load_json``, replaced whole: every malformed or cut body is answered here
        (webargs' own would call its private hooks ``_raw_load_json`` and
        ``_handle_invalid_json_error``, and answer 422)."""
        body = req.get_data(cache=True)
        if _cut_at_the_size_limit(req, body):
            abort(413)
        if not is_json_request(req):
            if body or req.method in ("POST", "PUT"):
                abort(400, message="Request body must be JSON (Content-Type: application/json)")
            return missing
        if not body:
            if req.method in ("POST", "PUT"):
                abort(400, message="Request body must be a JSON object")
            return missing
        try:
            document = parse_json(body)
        except (ValueError, RecursionError):
            # Malformed JSON, invalid UTF-8, integers beyond Python's digit limit, nesting
            # deeper than the parser's recursion limit.
            abort(400, message="Invalid JSON body")
        if not isinstance(document, dict):
            abort(400, message="Request body must be a JSON object")
        return document

    def load_querystring(self, req: Request, schema: ma.Schema) -> Any:
        repeated = sorted(name for name, values in req.args.lists() if len(values) > 1)
        if repeated:
            errors = {name: ["Given more than once."] for name in repeated}
            abort(400, message=describe_errors(errors), errors=errors)
        return super().load_querystring(req, schema)


def class_wide_rules(self: Any, field: ma.fields.Field, ret: dict[str, Any], **kwargs: Any) -> dict:
    """The OpenAPI rules a field class states for all its fields (``OPENAPI``, e.g.
    ``app.validation.InstantField``), under what the field itself says; descriptions join."""
    rules = getattr(field, "OPENAPI", None)
    if not rules:
        return {}
    added = {key: value for key, value in rules.items() if ret.get(key) in (None, {})}
    if (
        "description" in rules
        and "description" in ret
        and rules["description"] not in ret["description"]
    ):
        added["description"] = f"{ret['description'].rstrip('.')}. {rules['description']}"
    return added


class Api(flask_smorest.Api):
    ERROR_SCHEMA = ErrorSchema

    def init_app(self, app: Flask, *, spec_kwargs: dict | None = None) -> None:
        app.url_map.converters["id"] = IdConverter
        super().init_app(app, spec_kwargs=spec_kwargs)
        self.spec.components.security_scheme(
            "ApiKeyAuth", {"type": "apiKey", "in": "header", "name": "x-calendar-api-key"}
        )
        self.register_converter(IdConverter, _id_parameter_schema)
        self.register_field(InstantField, "string", None)
        self.ma_plugin.converter.add_attribute_function(class_wide_rules)
        # flask-smorest documents its own pagination header schema; no operation here uses it.
        self.spec.components.schemas.pop("PaginationMetadata", None)

    def handle_http_exception(self, error: Any) -> Any:
        return handle_http_exception(error)


_INTEGER_HEADER = {"type": "integer", "minimum": 0}
RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": {"description": "Requests allowed per window", "schema": _INTEGER_HEADER},
    "X-RateLimit-Remaining": {
        "description": "Requests left in the current window",
        "schema": _INTEGER_HEADER,
    },
    "X-RateLimit-Reset": {
        "description": "Epoch second at which the oldest request in the window stops counting",
        "schema": _INTEGER_HEADER,
    },
}
RETRY_AFTER_HEADER = {
    "Retry-After": {"description": "Seconds to wait before retrying", "schema": _INTEGER_HEADER}
}

_AUTH_RESPONSES = {
    401: "Missing, unknown, inactive or expired API key, or a key without a sub account",
    403: "The API key lacks the permission this operation needs",
}
_RATE_LIMITED = "Too many requests: 60 a minute per key (30 per address without a usable key)"


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = ApiParser()

    def requires(self, permission: Permission) -> Callable[[Callable], Callable]:
        """Authenticate the API key and check ``permission`` before anything else runs
        (so a bad key is a 401 even when the request is also malformed). Put it first."""

        def decorator(func: Callable) -> Callable:
            @wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                authorize(permission)
                return func(*args, **kwargs)

            documented: Callable = self.doc(security=[{"ApiKeyAuth": []}])(wrapper)
            documented = self.error(401, _AUTH_RESPONSES[401], examples.UNAUTHENTICATED)(documented)
            documented = self.error(403, _AUTH_RESPONSES[403], examples.forbidden(permission))(
                documented
            )
            documented = self.alt_response(
                429,
                schema=ErrorSchema,
                description=_RATE_LIMITED,
                headers={**RATE_LIMIT_HEADERS, **RETRY_AFTER_HEADER},
                examples=examples.RATE_LIMITED,
            )(documented)
            for status, description in examples.SERVER_LIMITS.items():
                documented = self.alt_response(
                    status,
                    schema={"type": "string", "minLength": 1},
                    content_type="text/html",
                    description=description,
                )(documented)
            return documented

        return decorator

    def response(
        self, status_code: int, schema: Any = None, *, headers: dict | None = None, **kwargs: Any
    ) -> Callable[[Callable], Callable]:
        """flask-smorest's ``response``, with the rate-limit headers every answer carries."""
        return super().response(
            status_code, schema, headers={**RATE_LIMIT_HEADERS, **(headers or {})}, **kwargs
        )

    def calendars_unreachable(self) -> Callable[[Callable], Callable]:
        """A write that asks the connected calendars (the live check) may be a 503 to retry,
        where the operator chose ``strict``."""
        return self.alt_response(
            503,
            schema=ErrorSchema,
            description="Only with CALENDAR_LIVE_CHECK=strict: a connected calendar did not"
            " answer about the time in time; nothing was written, retry after Retry-After",
            headers={**RATE_LIMIT_HEADERS, **RETRY_AFTER_HEADER},
            examples=examples.CALENDAR_UNREACHABLE,
        )

    def error(
        self, status: int, description: str, examples: dict[str, Any] | None = None
    ) -> Callable[[Callable], Callable]:
        """Document an error answer of one operation, with its examples (``app.api.examples``:
        named answers with their exact messages)."""
        return self.alt_response(
            status,
            schema=ErrorSchema,
            description=description,
            headers=RATE_LIMIT_HEADERS,
            examples=examples,
        )
