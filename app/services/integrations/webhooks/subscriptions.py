"""Webhook subscriptions: where a sub account's booking events are POSTed.

A subscription has a name (unique in the sub account), a URL (checked by ``targets`` when saved
and again at every send), the events it wants (names, or ``*``) and a signing secret in the
Standard Webhooks form (``whsec_`` + base64 of 24 random bytes): generated unless given, shown
once when created, stored encrypted.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates

from app.config import settings
from app.extensions import db
from app.models import SubAccount, WebhookSubscription
from app.services.common.encryption import encrypt_secret
from app.services.common.errors import NotFound
from app.services.common.lookups import get_checked, load_named, rows_in_order
from app.services.integrations.events import BookingEventKind
from app.services.integrations.outbound.addresses import UnsafeUrl, resolve_target
from app.validation import Text

EVENT_NAMES = [str(kind) for kind in BookingEventKind]
SECRET_PREFIX = "whsec_"


class SubscriptionNotFound(NotFound):
    message = "Webhook subscription not found"


def require_https() -> bool:
    return settings().app_env == "production"


def allow_private() -> bool:
    return settings().webhook_allow_private


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


class WebhookDoc(Schema):
    """A subscription as the provisioning document and ``flask webhooks add`` give it."""

    name = Text(required=True, validate=validate.Length(min=1, max=255))
    url = Text(required=True, validate=validate.Length(max=2000))
    events = fields.List(
        fields.String(validate=validate.OneOf(["*", *EVENT_NAMES])),
        required=True,
        validate=validate.Length(min=1),
    )
    secret = Text(load_default=None, allow_none=True)

    @validates("url")
    def url_is_safe(self, value: str, **kwargs: Any) -> None:
        try:
            resolve_target(value, require_https=require_https(), allow_private=allow_private())
        except UnsafeUrl as err:
            raise ValidationError(err.message) from None

    @validates("secret")
    def secret_is_standard(self, value: str | None, **kwargs: Any) -> None:
        if value is None:
            return
        try:
            key = base64.b64decode(value.removeprefix(SECRET_PREFIX), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if not value.startswith(SECRET_PREFIX) or not 24 <= len(key) <= 64:
            raise ValidationError("Must be 'whsec_' followed by base64 of 24 to 64 bytes.")


def create_subscription(sub_account: SubAccount, doc: dict) -> tuple[WebhookSubscription, str]:
    """A subscription from a loaded ``WebhookDoc``; returns it and its secret (shown once)."""
    secret = doc["secret"] or new_secret()
    subscription = WebhookSubscription(
        sub_account_id=sub_account.id,
        name=doc["name"],
        url=doc["url"],
        events=sorted(set(doc["events"])),
        encrypted_secret=encrypt_secret(secret, settings().secret_keys[0]),
        active=True,
    )
    db.session.add(subscription)
    return subscription, secret


def add_subscription(
    sub_account_id: int, document: dict[str, Any]
) -> tuple[WebhookSubscription, str]:
    """``create_subscription`` from raw input, every problem named by field."""
    sub_account, doc = load_named(sub_account_id, WebhookDoc(), document, WebhookSubscription)
    subscription, secret = create_subscription(sub_account, doc)
    db.session.flush()
    return subscription, secret


def list_subscriptions(sub_account_id: int | None = None) -> list[WebhookSubscription]:
    return rows_in_order(WebhookSubscription, sub_account_id)


def get_subscription(subscription_id: int) -> WebhookSubscription:
    return get_checked(WebhookSubscription, subscription_id, lambda _: True, SubscriptionNotFound)


def get_sub_account_subscription(sub_account_id: int, subscription_id: int) -> WebhookSubscription:
    """The subscription, if it is ``sub_account_id``'s: to someone who may open only that sub
    account (the dashboard), another one's subscription does not exist."""
    return get_checked(
        WebhookSubscription,
        subscription_id,
        lambda s: s.sub_account_id == sub_account_id,
        SubscriptionNotFound,
    )


def remove_subscription(subscription_id: int) -> None:
    """Delete the subscription and its delivery history."""
    db.session.delete(get_subscription(subscription_id))
    db.session.flush()


def enable_subscription(subscription_id: int) -> WebhookSubscription:
    """Turn a disabled subscription back on (its failure streak starts afresh)."""
    subscription = get_subscription(subscription_id)
    subscription.active = True
    subscription.disabled_at = None
    subscription.disabled_reason = None
    subscription.failing_since = None
    db.session.flush()
    return subscription
