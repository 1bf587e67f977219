"""Availability kept per calendar version and asked conditionally: weak ETags, 304s, and
answers that still follow "now" to the second (DESIGN.md, Operator interfaces: availability
caching). The clock is set to fixed instants (time-machine), so these tests read no real date."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
import time_machine
from sqlalchemy import event

from app.api.availability.schemas import AvailabilityDaySchema
from app.extensions import db
from app.models import SubAccount
from app.scheduling.timezones import InstantInput
from app.services.availability.cache import calendar_version
from app.services.availability.open_time import AvailabilityQuery, check_availability
from tests.factories import hold_through_api, make_blocked_time, make_booking, ny, z

AVAILABILITY = "/v1/api/calendar/availability"
MONDAY = date(2031, 3, 3)  # a Monday in the tenant's New York working week
BEFORE_OPENING = ny(MONDAY, 8)  # "now" for these tests: an hour before the first slot


def ask(client, tenant, first=MONDAY, last=MONDAY + timedelta(days=4), etag=None, key="all"):
    headers = tenant.headers(key)
    if etag is not None:
        headers["If-None-Match"] = etag
    query = {"startDate": first.isoformat(), "endDate": last.isoformat()}
    query["eventTypeId"] = tenant.event_types["Checkup"]
    return client.get(AVAILABILITY, query_string=query, headers=headers)


def starts(response, day=MONDAY) -> list[str]:
    (entry,) = [d for d in response.json if d["date"] == day.isoformat()]
    return [slot["start"] for slot in entry["slots"]]


@pytest.fixture
def at_eight():
    with time_machine.travel(BEFORE_OPENING, tick=False) as traveller:
        yield traveller


def test_an_answer_carries_a_weak_etag_and_may_be_kept_only_privately(client, tenant, at_eight):
    response = ask(client, tenant)
    assert response.status_code == 200
    assert response.headers["ETag"].startswith('W/"')
    assert response.headers["Cache-Control"] == "private, no-cache"


def test_the_answer_is_what_the_documented_schema_dumps(client, tenant, at_eight):
    response = ask(client, tenant)
    query = AvailabilityQuery(
        InstantInput(MONDAY),
        InstantInput(MONDAY + timedelta(days=4)),
        event_type_id=tenant.event_types["Checkup"],
    )
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    expected = AvailabilityDaySchema(many=True).dump(
        check_availability(sub_account, query, BEFORE_OPENING)
    )
    assert response.json == expected
    assert starts(response)[0] == z(ny(MONDAY, 9))


def test_the_current_tag_is_answered_304_without_a_body_with_its_headers(client, tenant, at_eight):
    first = ask(client, tenant)
    again = ask(client, tenant, etag=first.headers["ETag"])
    assert again.status_code == 304
    assert again.get_data() == b""
    assert again.headers["ETag"] == first.headers["ETag"]
    assert again.headers["Cache-Control"] == "private, no-cache"
    assert "X-RateLimit-Remaining" in again.headers


def test_a_304_still_counts_against_the_rate_limit(make_app, tenants):
    app = make_app(RATE_LIMIT="2 per 1 minute")
    with app.app_context(), time_machine.travel(BEFORE_OPENING, tick=False):
        tenant = tenants.create()
        client = app.test_client()
        etag = ask(client, tenant).headers["ETag"]
        assert ask(client, tenant, etag=etag).status_code == 304
        assert ask(client, tenant, etag=etag).status_code == 429


def test_a_tag_among_others_or_a_star_matches_and_a_stale_one_gets_the_answer(
    client, tenant, at_eight
):
    etag = ask(client, tenant).headers["ETag"]
    assert ask(client, tenant, etag=f'W/"older", {etag}').status_code == 304
    assert ask(client, tenant, etag="*").status_code == 304
    stale = ask(client, tenant, etag='W/"0.0.0.0.0"')
    assert stale.status_code == 200 and stale.json


def test_a_booking_made_elsewhere_changes_the_tag_and_the_answer_at_once(client, tenant, at_eight):
    first = ask(client, tenant)
    assert z(ny(MONDAY, 10)) in starts(first)
    make_booking(tenant, ny(MONDAY, 10), minutes=60)  # straight into the database
    after = ask(client, tenant, etag=first.headers["ETag"])
    assert after.status_code == 200
    assert after.headers["ETag"] != first.headers["ETag"]
    assert z(ny(MONDAY, 10)) not in starts(after)


def test_blocked_time_changes_the_tag(client, tenant, at_eight):
    first = ask(client, tenant)
    make_blocked_time(tenant, ny(MONDAY, 13), ny(MONDAY, 14))
    after = ask(client, tenant, etag=first.headers["ETag"])
    assert after.status_code == 200
    assert z(ny(MONDAY, 13)) not in starts(after)


def test_another_question_has_another_tag(client, tenant, at_eight):
    week = ask(client, tenant)
    day = ask(client, tenant, last=MONDAY)
    assert week.headers["ETag"] != day.headers["ETag"]
    assert ask(client, tenant, last=MONDAY, etag=week.headers["ETag"]).status_code == 200


def test_a_slot_that_starts_is_no_longer_offered_and_the_tag_changes_without_any_write(
    client, tenant, at_eight
):
    first = ask(client, tenant)
    version = calendar_version(tenant.sub_account_id)
    at_eight.move_to(ny(MONDAY, 9) + timedelta(seconds=1))
    later = ask(client, tenant, etag=first.headers["ETag"])
    assert later.status_code == 200
    assert later.headers["ETag"] != first.headers["ETag"]
    assert z(ny(MONDAY, 9)) not in starts(later)
    assert starts(later)[0] == z(ny(MONDAY, 10))  # Checkup: 60 minutes on its own grid
    assert calendar_version(tenant.sub_account_id) == version


def test_minimum_notice_holds_to_the_second(make_app, tenants):
    app = make_app()
    with app.app_context(), time_machine.travel(ny(MONDAY, 7), tick=False) as clock:
        tenant = tenants.create(
            settings={"defaultDuration": 30, "minimumNoticeMinutes": 120, "bookingHorizonDays": 60}
        )
        client = app.test_client()
        assert starts(ask(client, tenant))[0] == z(ny(MONDAY, 9))
        clock.move_to(ny(MONDAY, 7) + timedelta(seconds=1))
        assert starts(ask(client, tenant))[0] == z(ny(MONDAY, 10))


def test_an_expired_hold_frees_its_time_without_any_write(client, tenant, at_eight):
    held = hold_through_api(client, tenant, ny(MONDAY, 11), ttlSeconds=60)
    assert held.status_code == 201, held.json
    during = ask(client, tenant)
    assert z(ny(MONDAY, 11)) not in starts(during)
    version = calendar_version(tenant.sub_account_id)
    at_eight.shift(timedelta(seconds=61))
    after = ask(client, tenant, etag=during.headers["ETag"])
    assert after.status_code == 200
    assert z(ny(MONDAY, 11)) in starts(after)
    assert calendar_version(tenant.sub_account_id) == version


def test_a_repeated_question_reads_only_the_calendar_version(make_app, tenants, at_eight):
    # The key is answered from memory for a minute here, not the default second: on a busy
    # machine the first question alone may take longer, and the key's own read is not what
    # this test is about.
    app = make_app(API_KEY_CACHE_SECONDS=60)
    with app.app_context():
        tenant = tenants.create()
        client = app.test_client()
        ask(client, tenant)  # computed and kept
        statements: list[str] = []

        def note(conn, cursor, statement, *args):
            statements.append(statement)

        event.listen(db.engine, "before_cursor_execute", note)
        try:
            again = ask(client, tenant)
        finally:
            event.remove(db.engine, "before_cursor_execute", note)
    assert again.status_code == 200
    assert len(statements) == 1 and "calendar_versions" in statements[0], statements


def test_a_calendar_that_never_changed_has_version_zero(app):
    assert calendar_version(123_456) == 0


def test_without_keeping_answers_are_computed_and_still_tagged(make_app, tenants):
    app = make_app(AVAILABILITY_KEEP_SECONDS=0)
    with app.app_context(), time_machine.travel(BEFORE_OPENING, tick=False):
        tenant = tenants.create()
        client = app.test_client()
        first = ask(client, tenant)
        assert ask(client, tenant, etag=first.headers["ETag"]).status_code == 304
