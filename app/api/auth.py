"""API-key authentication for the agent API.

A request carries its API key in ``x-calendar-api-key``, or an OAuth access token in
``Authorization: Bearer`` (an agent connected with OAuth 2.1, ``app.oauth``): the token acts as
its grant, an API key of the sub account with the permissions its owner consented to, so both
meet the same checks, messages and rate limit. The key is authenticated once per request, when
the rate limiter asks whose request it is (``authentication``); the view's ``authorize`` then
turns a failure into the 401 and checks the permission. The request's key lives on ``flask.g``.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app, g, request

from app.api_terms import RESOURCE_METADATA_PATH
from app.config import settings_of
from app.database import reads_only
from app.extensions import db
from app.models import ApiKey, Permission, SubAccount
from app.models.types import utcnow
from app.services.accounts.agent_access import authenticate_access_token
from app.services.accounts.api_keys import authenticate_api_key, record_key_use, require_permission
from app.services.common.errors import AuthenticationFailed

# How often an API key's lastUsedAt is written at most, in seconds: a write per request would
# turn every read into a write.
LAST_USED_RESOLUTION_SECONDS = 60

API_KEY_HEADER = "x-calendar-api-key"
# The agent API's reads: none writes more than one row (a key's lastUsedAt) in one statement.
READ_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Authentication:
    api_key: ApiKey | None
    failure: AuthenticationFailed | None = None


def authentication() -> Authentication:
    """Who sent this request, decided once per request: the request's first use of the
    database, so it is also where a read (GET, HEAD) is marked as one (``reads_only``)."""
    if "authentication" not in g:
        if request.method in READ_METHODS:
            reads_only(db.session)
        try:
            g.authentication = Authentication(_authenticate())
        except AuthenticationFailed as failure:
            g.authentication = Authentication(None, failure)
    return g.authentication


def _authenticate() -> ApiKey:
    """The key the request acts as: its API key, else the grant of its bearer token."""
    plain_key = request.headers.get(API_KEY_HEADER)
    authorization = request.headers.get("Authorization", "")
    if plain_key is None and authorization[:7].lower() == "bearer ":
        base = settings_of(current_app).base_url
        # Said with the 401 (RFC 6750 §3): why, and where the API's OAuth metadata is.
        g.bearer_challenge = (
            f'Bearer error="invalid_token", resource_metadata="{base}{RESOURCE_METADATA_PATH}"'
        )
        return authenticate_access_token(authorization[7:].strip(), utcnow())
    return authenticate_api_key(plain_key, utcnow(), current_app.extensions.get("api_key_cache"))


def authorize(permission: Permission) -> None:
    """401 unless the request carries a usable key; 403 unless it grants ``permission``."""
    result = authentication()
    if result.failure is not None:
        raise result.failure
    api_key = result.api_key
    assert api_key is not None  # an authentication without a failure has its key
    now = utcnow()
    if record_key_use(api_key, now, LAST_USED_RESOLUTION_SECONDS):
        db.session.commit()
        if (cache := current_app.extensions.get("api_key_cache")) is not None:
            cache.note_use(api_key.digest, now)
    g.api_key = api_key
    require_permission(api_key, permission)


def current_api_key() -> ApiKey:
    return g.api_key


def current_sub_account() -> SubAccount:
    return g.api_key.sub_account
