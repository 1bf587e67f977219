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
from app.models import (
    AvailabilityProfile,
    EventType,
    EventTypeHost,
    Host,
    HostAssignment,
    SubAccount,
    User,
)
from app.models.limits import EMAIL_MAX, NAME_MAX
from app.scheduling.round_robin import (
    PRIORITY_DEFAULT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    WEIGHT_DEFAULT,
    WEIGHT_MAX,
    WEIGHT_MIN,
)
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


class EventTypeHostDoc(Schema):
    """A host of a round-robin or collective event type, by name, with its priority (higher
    first) and weight for that type."""

    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    priority = fields.Integer(
        load_default=PRIORITY_DEFAULT,
        strict=True,
        validate=validate.Range(min=PRIORITY_MIN, max=PRIORITY_MAX),
    )
    weight = fields.Integer(
        load_default=WEIGHT_DEFAULT,
        strict=True,
        validate=validate.Range(min=WEIGHT_MIN, max=WEIGHT_MAX),
    )


def assignment_problems(doc: dict[str, Any], host_names: set[str]) -> dict[str, list[str]]:
    """What is wrong with an event type document's ``assignment``, ``hosts`` and ``maxAhead``,
    by field: a team type names its hosts (known ones, each once) and has one seat a slot;
    a one-host type names none; only round robin has ``maxAhead``."""
    problems: dict[str, list[str]] = {}
    assignment, hosts = doc["assignment"], doc["hosts"]
    names = [h["name"] for h in hosts]
    if assignment is HostAssignment.SINGLE:
        if hosts:
            problems["hosts"] = ["Only a round-robin or collective event type lists hosts."]
    elif not hosts:
        problems["hosts"] = [f"A {assignment.value} event type needs at least one host."]
    elif unknown := sorted(set(names) - host_names):
        problems["hosts"] = [f"Unknown host '{name}'." for name in unknown]
    elif len(set(names)) != len(names):
        problems["hosts"] = ["Each host may be listed once."]
    if assignment is not HostAssignment.SINGLE and doc.get("host") is not None:
        problems["host"] = ["A round-robin or collective event type lists its hosts instead."]
    if assignment is not HostAssignment.SINGLE and doc["seats"] != 1:
        problems["seats"] = ["A round-robin or collective event type has one seat a slot."]
    if doc["maxAhead"] is not None and assignment is not HostAssignment.ROUND_ROBIN:
        problems["maxAhead"] = ["Only a round-robin event type has maxAhead."]
    return problems


def assign_hosts(event_type: EventType, doc: dict[str, Any], hosts: dict[str, Host]) -> None:
    """Give ``event_type`` the assignment and hosts of its document (checked by
    ``assignment_problems``): a team type's first listed host is its ``host_id``."""
    event_type.assignment = doc["assignment"]
    event_type.max_ahead = doc["maxAhead"]
    if doc["hosts"]:
        event_type.host_id = hosts[doc["hosts"][0]["name"]].id
    event_type.hosts = [
        EventTypeHost(host_id=hosts[h["name"]].id, priority=h["priority"], weight=h["weight"])
        for h in doc["hosts"]
    ]
