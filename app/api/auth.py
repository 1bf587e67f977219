"""API-key authentication for the agent API. The request's key and sub account live on
``flask.g`` for the rest of the request."""

from __future__ import annotations

from flask import current_app, g, request

from app.extensions import db
from app.models import ApiKey, Permission, SubAccount
from app.models.types import utcnow
from app.services.api_keys import authenticate_api_key, record_key_use, require_permission

API_KEY_HEADER = "x-calendar-api-key"


def authorize(permission: Permission) -> None:
    now = utcnow()
    api_key = authenticate_api_key(request.headers.get(API_KEY_HEADER), now)
    last_used = api_key.last_used_at
    resolution = current_app.config["API_KEY_LAST_USED_RESOLUTION"]
    if last_used is None or (now - last_used).total_seconds() >= resolution:
        record_key_use(api_key.id, now, resolution)
        db.session.commit()
    g.api_key = api_key
    require_permission(api_key, permission)


def current_api_key() -> ApiKey:
    return g.api_key


def current_sub_account() -> SubAccount:
    return g.api_key.sub_account
