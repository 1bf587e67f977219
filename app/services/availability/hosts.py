"""Hosts: who a sub account's bookings are made with (``app.models.host``).

A sub account starts with the hosts its provisioning document names, or with one: named after
the sub account, with its notification email (the one-host case every sub account was before
teams). A host's working hours are an availability profile of the sub account (default: the
sub account's default profile), its timezone its own (default: the sub account's), and it may
be a dashboard user of the agency.
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, validate
from sqlalchemy import select

from app.extensions import db
from app.models import AvailabilityProfile, Host, SubAccount, User
from app.models.limits import EMAIL_MAX, NAME_MAX
from app.validation import Text, TimezoneField


class HostDoc(Schema):
    """A host as the provisioning document describes it: ``availabilityProfile`` names one of
    the document's profiles, ``user`` the email of one of the agency's users."""

    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    email = fields.Email(
        load_default=None, allow_none=True, validate=validate.Length(max=EMAIL_MAX)
    )
    timezone = TimezoneField(load_default=None, allow_none=True)
    availabilityProfile = Text(load_default=None, allow_none=True)
    user = fields.Email(load_default=None, allow_none=True)


def create_hosts(
    sub_account: SubAccount,
    docs: list[dict[str, Any]],
    profiles: dict[str, AvailabilityProfile],
    users: dict[str, User],
) -> dict[str, Host]:
    """The sub account's hosts from ``docs`` (each one's profile and user looked up by name and
    email), or its one default host when there are none; flushed, by name."""
    db.session.flush()  # the profiles' ids
    if not docs:
        docs = [{"name": sub_account.name, "email": sub_account.settings.notification_email}]
    hosts = {}
    for doc in docs:
        profile = profiles.get(doc.get("availabilityProfile") or "")
        user = users.get((doc.get("user") or "").lower())
        hosts[doc["name"]] = Host(
            sub_account_id=sub_account.id,
            name=doc["name"],
            email=doc.get("email"),
            timezone=doc.get("timezone"),
            availability_profile_id=profile.id if profile is not None else None,
            user_id=user.id if user is not None else None,
        )
        db.session.add(hosts[doc["name"]])
    db.session.flush()
    return hosts


def hosts_of(sub_account_id: int) -> list[Host]:
    """The sub account's hosts, the first (the one-host case's) first."""
    return list(
        db.session.scalars(
            select(Host).where(Host.sub_account_id == sub_account_id).order_by(Host.id)
        )
    )
