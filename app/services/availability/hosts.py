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
from app.services.availability.profiles import chosen_profile
from app.services.common.errors import HostNotFound, InvalidRequest
from app.services.common.ids import is_storable_id
from app.services.common.lookups import load_document, load_named, refuse_taken_name
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


class HostShareDoc(Schema):
    """A team host's priority (higher first) and weight (its share) in an event type."""

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


class EventTypeHostDoc(HostShareDoc):
    """A host of a round-robin or collective event type, by name (the provisioning
    document's)."""

    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))


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


class AssignmentDoc(Schema):
    """Who an event type's bookings are made with (``HostAssignment``), and round robin's
    optional bound; its ``hosts`` are each document's own (by name or by id)."""

    assignment = fields.Enum(HostAssignment, by_value=True, load_default=HostAssignment.SINGLE)
    maxAhead = fields.Integer(
        load_default=None, allow_none=True, strict=True, validate=validate.Range(min=0)
    )


def assign_hosts(
    event_type: EventType, doc: dict[str, Any], team: list[tuple[int, int, int]]
) -> None:
    """Give ``event_type`` its document's assignment and ``maxAhead`` (checked by
    ``assignment_problems``) and its team, ``(host id, priority, weight)`` each: a team
    type's first listed host is its ``host_id``. A host that stays listed keeps since when it
    has been eligible (fairness counts it as it was); a host added now is eligible from now on
    (calibrated, not handed the month's backlog)."""
    event_type.assignment = doc["assignment"]
    event_type.max_ahead = doc["maxAhead"]
    if team:
        event_type.host_id = team[0][0]
    kept = {row.host_id: row for row in event_type.hosts}
    rows = []
    for host_id, priority, weight in team:
        row = kept.get(host_id) or EventTypeHost(host_id=host_id)
        row.priority, row.weight = priority, weight
        rows.append(row)
    event_type.hosts = rows


class HostFields(Schema):
    """A host as the dashboard edits it: its working hours named by profile id (None: the sub
    account's default profile)."""

    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    email = fields.Email(
        load_default=None, allow_none=True, validate=validate.Length(max=EMAIL_MAX)
    )
    timezone = TimezoneField(load_default=None, allow_none=True)
    availabilityProfileId = fields.Integer(load_default=None, allow_none=True, strict=True)


def get_host(sub_account: SubAccount, host_id: int) -> Host:
    """The sub account's host ``host_id``; anyone else's is ``HostNotFound``."""
    host = db.session.get(Host, host_id) if is_storable_id(host_id) else None
    if host is None or host.sub_account_id != sub_account.id:
        raise HostNotFound()
    return host


def create_host(sub_account: SubAccount, document: dict[str, Any]) -> Host:
    """A new, active host from ``HostFields``; its name not yet taken."""
    _, doc = load_named(sub_account.id, HostFields(), document, Host)
    host = Host(sub_account_id=sub_account.id)
    _apply_host(sub_account, host, doc)
    db.session.add(host)
    db.session.flush()
    return host


def update_host(sub_account: SubAccount, host_id: int, document: dict[str, Any]) -> Host:
    """Every field of the host replaced by ``document``'s."""
    host = get_host(sub_account, host_id)
    doc = load_document(HostFields(), document)
    refuse_taken_name(Host, sub_account, doc["name"], except_id=host.id)
    _apply_host(sub_account, host, doc)
    db.session.flush()
    return host


def _apply_host(sub_account: SubAccount, host: Host, doc: dict[str, Any]) -> None:
    profile = chosen_profile(sub_account, doc["availabilityProfileId"])
    host.name = doc["name"]
    host.email = doc["email"]
    host.timezone = doc["timezone"]
    host.availability_profile_id = profile.id if profile is not None else None


def single_event_types_of(host: Host) -> list[str]:
    """The names of the offered one-host event types ``host`` is the host of."""
    return list(
        db.session.scalars(
            select(EventType.name)
            .where(
                EventType.host_id == host.id,
                EventType.assignment == HostAssignment.SINGLE,
                EventType.active,
            )
            .order_by(EventType.name)
        )
    )


def set_host_active(sub_account: SubAccount, host_id: int, active: bool) -> Host:
    """Deactivate a host (round-robin and collective types no longer offer or book it; its
    bookings stay, its connected calendars keep being read) or make it active again. A host
    that is the one host of an offered event type is not deactivated: that type would have
    nobody to book."""
    host = get_host(sub_account, host_id)
    if not active and (types := single_event_types_of(host)):
        names = ", ".join(types)
        raise InvalidRequest(
            f"{host.name} is the host of {names}: give it another host, or deactivate it, first"
        )
    host.active = active
    db.session.flush()
    return host
