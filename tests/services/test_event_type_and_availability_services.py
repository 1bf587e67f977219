"""The event type, availability profile and blocked time services on their own: provisioning's
documents and rules, refusals named by field, and no commit (the caller decides)."""

from __future__ import annotations

from datetime import date

import pytest

from app.extensions import db
from app.models import AvailabilityProfile, EventType, SubAccount
from app.services.availability.blocked_times import add_blocked_time
from app.services.availability.event_types import create_event_type, update_event_type
from app.services.availability.profiles import ProfileNotFound, create_profile, get_profile
from app.services.common.errors import EventTypeNotFound, InvalidRequest
from app.services.scheduling_inputs import get_event_type
from tests.factories import next_monday, ny

MONDAY = next_monday()


def sub_account_of(tenant) -> SubAccount:
    return db.session.get(SubAccount, tenant.sub_account_id)


@pytest.mark.date_sensitive
def test_a_profile_takes_provisionings_whole_document(tenant):
    profile = create_profile(
        sub_account_of(tenant),
        {
            "name": "Split",
            "weeklyHours": {"tue": [["08:00", "12:00"], ["13:00", "18:00"]]},
            "dateOverrides": [{"date": MONDAY.isoformat(), "hours": []}],
        },
    )
    assert [(h.weekday, h.start_minute, h.end_minute) for h in profile.weekly_hours] == [
        (1, 480, 720),
        (1, 780, 1080),
    ]
    assert [(o.date, o.start_minute) for o in profile.date_overrides] == [(MONDAY, None)]


def test_a_new_default_profile_takes_the_default_over(tenant):
    create_profile(sub_account_of(tenant), {"name": "Evening", "default": True})
    defaults = db.session.query(AvailabilityProfile).filter_by(
        sub_account_id=tenant.sub_account_id, is_default=True
    )
    assert [p.name for p in defaults] == ["Evening"]


def test_services_flush_and_leave_the_commit_to_the_caller(tenant):
    created = create_event_type(sub_account_of(tenant), {"name": "Walk-in", "duration": 20})
    assert created.id is not None
    db.session.rollback()
    assert db.session.query(EventType).filter_by(name="Walk-in").first() is None


def test_an_event_type_refusal_names_each_field(tenant):
    with pytest.raises(InvalidRequest) as refused:
        update_event_type(
            sub_account_of(tenant),
            tenant.event_types["Checkup"],
            {"name": "", "duration": 2, "bufferAfter": -5},
        )
    assert set(refused.value.errors) == {"name", "duration", "bufferAfter"}


def test_another_sub_accounts_rows_are_not_found(tenants, tenant):
    theirs = tenants.create()
    mine = sub_account_of(tenant)
    with pytest.raises(EventTypeNotFound):
        get_event_type(mine, theirs.event_types["Cleaning"], offered_only=False)
    their_profile = theirs.raw["agencies"][0]["subAccounts"][0]["availabilityProfiles"]["Office"]
    with pytest.raises(ProfileNotFound):
        get_profile(mine, their_profile)


@pytest.mark.date_sensitive
def test_blocked_time_with_an_offset_is_that_instant(tenant):
    blocked = add_blocked_time(
        sub_account_of(tenant),
        {"start": f"{MONDAY.isoformat()}T14:00:00Z", "end": f"{MONDAY.isoformat()}T10:30"},
    )
    assert blocked.start_at.hour == 14  # UTC as given, not New York
    assert blocked.end_at == ny(MONDAY, 10, 30)


def test_blocked_time_refusals_name_both_ends(tenant):
    with pytest.raises(InvalidRequest) as refused:
        add_blocked_time(sub_account_of(tenant), {"start": "soon", "end": date.today()})
    assert set(refused.value.errors) == {"start", "end"}
