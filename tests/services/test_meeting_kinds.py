"""An event type that asks for Google Meet or Microsoft Teams is refused when it is saved unless
its sub account has an active connection that writes bookings into a calendar that makes such
meetings (issue 41), with a message that says what to connect: in the dashboard's service, on
its page next to the field, and in a provisioning document (whose own connections count)."""

from __future__ import annotations

import html
import re

import pytest

from app.extensions import db
from app.models import CalendarConnection, EventType, LocationKind, SubAccount
from app.services.accounts.provisioning import ProvisioningInvalid, provision
from app.services.availability.event_types import create_event_type, update_event_type
from app.services.common.errors import InvalidRequest
from app.services.integrations.calendars.connections import add_connection
from tests.dashboard_users import csrf_token
from tests.factories import tenant_document

MEET_NEEDS = (
    "Google Meet needs a connected Google calendar that bookings are written to: connect one"
    " under Calendar connections first."
)
TEAMS_NEEDS = (
    "Microsoft Teams needs a connected Microsoft 365 calendar that bookings are written to:"
    " connect one under Calendar connections first."
)


def connect(tenant, kind: str, **fields) -> CalendarConnection:
    document = {"name": kind, "kind": kind, **fields}
    if kind in ("google", "microsoft"):
        document.setdefault("refreshToken", "a-refresh-token")
    connection = add_connection(tenant.sub_account_id, document)
    db.session.commit()
    return connection


def consultation(kind: LocationKind, **fields) -> dict:
    return {"name": "Consultation", "duration": 30, "locationKind": kind.value, **fields}


def sub_account(tenant):
    return db.session.get(SubAccount, tenant.sub_account_id)


def refusal(tenant, document) -> list[str]:
    with pytest.raises(InvalidRequest) as refused:
        create_event_type(sub_account(tenant), document)
    db.session.rollback()
    return refused.value.errors["locationKind"]


@pytest.mark.parametrize(
    ("kind", "needs"),
    [(LocationKind.GOOGLE_MEET, MEET_NEEDS), (LocationKind.MICROSOFT_TEAMS, TEAMS_NEEDS)],
)
def test_a_meeting_kind_without_any_connection_is_refused_saying_what_to_connect(
    app, tenant, kind, needs
):
    assert refusal(tenant, consultation(kind)) == [needs]


def test_only_an_active_google_connection_that_writes_back_makes_meet(app, tenant):
    connect(tenant, "caldav", url="https://dav.example.test/", username="u", password="p")
    connect(tenant, "microsoft")
    off = connect(tenant, "google", name="Google, read only", writeBack=False)
    assert off.kind == "google"
    assert refusal(tenant, consultation(LocationKind.GOOGLE_MEET)) == [MEET_NEEDS]
    inactive = connect(tenant, "google", name="Google, switched off")
    inactive.active = False
    db.session.commit()
    assert refusal(tenant, consultation(LocationKind.GOOGLE_MEET)) == [MEET_NEEDS]

    connect(tenant, "google", name="Google")
    made = create_event_type(sub_account(tenant), consultation(LocationKind.GOOGLE_MEET))
    db.session.commit()
    assert made.location_kind == LocationKind.GOOGLE_MEET


def test_teams_needs_a_microsoft_connection_and_google_makes_none(app, tenant):
    connect(tenant, "google")
    assert refusal(tenant, consultation(LocationKind.MICROSOFT_TEAMS)) == [TEAMS_NEEDS]
    connect(tenant, "microsoft")
    made = create_event_type(sub_account(tenant), consultation(LocationKind.MICROSOFT_TEAMS))
    assert made.location_kind == LocationKind.MICROSOFT_TEAMS


def test_an_edit_to_a_meeting_kind_is_refused_the_same_way_and_changes_nothing(app, tenant):
    event_type_id = tenant.event_types["Cleaning"]
    with pytest.raises(InvalidRequest) as refused:
        update_event_type(
            sub_account(tenant),
            event_type_id,
            consultation(LocationKind.GOOGLE_MEET, name="Cleaning"),
        )
    db.session.rollback()
    assert refused.value.errors == {"locationKind": [MEET_NEEDS]}
    assert db.session.get(EventType, event_type_id).location_kind == LocationKind.IN_PERSON


def test_kinds_without_a_meeting_to_make_need_no_connection(app, tenant):
    for number, kind in enumerate((LocationKind.IN_PERSON, LocationKind.PHONE, LocationKind.LINK)):
        made = create_event_type(sub_account(tenant), consultation(kind, name=f"Visit {number}"))
        assert made.location_kind == kind


def test_the_dashboard_shows_the_refusal_next_to_the_field(app, signed_in, tenant):
    path = f"/dashboard/s/{tenant.sub_account_id}/event-types/new"
    token = csrf_token(signed_in, path)
    page = signed_in.post(
        path,
        data={
            "name": "Consultation",
            "duration": "30",
            "seats": "1",
            "location_kind": "google_meet",
            "location": "",
            "availability_profile_id": "",
            "csrf_token": token,
        },
    )
    assert page.status_code == 200  # the form again, its refusal next to the field
    shown = re.search(
        r'<p class="error" id="location_kind-errors">([^<]*)</p>', page.get_data(as_text=True)
    )
    assert shown and html.unescape(shown.group(1)) == MEET_NEEDS


def test_a_provisioning_document_counts_its_own_connections(app):
    refused_doc = tenant_document(eventTypes=[consultation(LocationKind.GOOGLE_MEET)])
    with pytest.raises(ProvisioningInvalid) as refused:
        provision(refused_doc)
    db.session.rollback()
    (path,) = refused.value.errors
    assert path == "agencies[0].subAccounts[0].eventTypes[0].locationKind"
    assert refused.value.errors[path] == [MEET_NEEDS]

    document = tenant_document(
        eventTypes=[consultation(LocationKind.GOOGLE_MEET)],
        calendarConnections=[{"name": "Google", "kind": "google", "refreshToken": "a-token"}],
    )
    created = provision(document)
    db.session.commit()
    (event_type_id,) = created["agencies"][0]["subAccounts"][0]["eventTypes"].values()
    assert db.session.get(EventType, event_type_id).location_kind == LocationKind.GOOGLE_MEET
