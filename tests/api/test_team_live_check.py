"""The live check of a round-robin write asks the candidate hosts' calendars: an event added
to one host's Google calendar a moment ago (no sync since) refuses a slot only that host could
take with ``external_busy``, and sends a slot another host can take to that other host."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models.types import utcnow
from app.services.integrations.calendars import sync_connection
from tests.factories import TenantFactory, next_monday, ny, z
from tests.oauth_fakes import ACCOUNT_EMAIL

pytestmark = [pytest.mark.date_sensitive, pytest.mark.one_shifted_clock]

MONDAY = next_monday()
AFTERNOONS = {d: [["13:00", "17:00"]] for d in ("mon", "tue", "wed", "thu", "fri")}


@pytest.fixture
def team(make_app, google):
    """Ana (09:00–17:00, her Google calendar connected and synced while empty) and Ben
    (afternoons, no calendar), the hosts of the round-robin "Intro"."""
    app = make_app(**google.app_settings())
    with app.app_context():
        tenant = TenantFactory().create(
            hosts=[{"name": "Ana"}, {"name": "Ben", "availabilityProfile": "Afternoons"}],
            availabilityProfiles=[
                {
                    "name": "Office",
                    "default": True,
                    "weeklyHours": {
                        d: [["09:00", "17:00"]] for d in ("mon", "tue", "wed", "thu", "fri")
                    },
                },
                {"name": "Afternoons", "weeklyHours": AFTERNOONS},
            ],
            calendarConnections=[
                {
                    "name": "Ana's Google",
                    "kind": "google",
                    "host": "Ana",
                    "refreshToken": google.issue_refresh_token(ACCOUNT_EMAIL),
                }
            ],
            eventTypes=[
                {
                    "name": "Intro",
                    "duration": 30,
                    "assignment": "round_robin",
                    "hosts": [{"name": "Ana"}, {"name": "Ben"}],
                }
            ],
        )
        assert sync_connection(tenant.connections["Ana's Google"], now=utcnow()).ok
        db.session.commit()
        tenant.client = app.test_client()
        yield tenant
        db.session.remove()


def book(tenant, start):
    return tenant.client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Intro']}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": "lead@example.test"}],
        },
        headers=tenant.headers(),
    )


def test_an_event_just_added_to_the_only_free_hosts_calendar_is_external_busy(team, google):
    google.add_event(ACCOUNT_EMAIL, ny(MONDAY, 10), ny(MONDAY, 11))
    refused = book(team, ny(MONDAY, 10))  # Ben works afternoons: only Ana could take it
    assert refused.status_code == 400, refused.json
    assert refused.json["code"] == "external_busy"


def test_a_slot_another_host_can_take_goes_to_that_host(team, google):
    google.add_event(ACCOUNT_EMAIL, ny(MONDAY, 14), ny(MONDAY, 15))
    # Both free as last synced, level, Ana first by id: without asking her calendar, hers.
    created = book(team, ny(MONDAY, 14))
    assert created.status_code == 201, created.json
    assert [h["name"] for h in created.json["hosts"]] == ["Ben"]
