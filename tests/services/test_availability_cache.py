"""Where availability is kept (``app.services.availability.cache``): shared by processes through
Redis, never kept when the calendar changed while it was computed, and answered without Redis
when Redis does not answer. Fixed dates far ahead; the clock is not read."""

from __future__ import annotations

from datetime import date

import pytest
import redis
from sqlalchemy import event

from app.extensions import db
from app.models import SubAccount
from app.scheduling.timezones import InstantInput
from app.services.availability import cache
from app.services.availability.cache import SlotSetStore, availability_at, calendar_version
from app.services.availability.open_time import AvailabilityQuery
from tests.factories import make_blocked_time, ny
from tests.servers import MACHINE_REDIS, free_port

MONDAY = date(2031, 3, 3)
NOW = ny(MONDAY, 7).timestamp()


def question(tenant) -> AvailabilityQuery:
    return AvailabilityQuery(
        InstantInput(MONDAY), InstantInput(MONDAY), event_type_id=tenant.event_types["Checkup"]
    )


def statements_during(action) -> list[str]:
    seen: list[str] = []

    def note(conn, cursor, statement, *args):
        seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", note)
    try:
        action()
    finally:
        event.remove(db.engine, "before_cursor_execute", note)
    return seen


@pytest.fixture
def machine_redis():
    client = redis.Redis.from_url(MACHINE_REDIS, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as error:
        pytest.fail(f"the machine's Redis at {MACHINE_REDIS} does not answer: {error}")
    return MACHINE_REDIS


def test_a_set_computed_by_one_process_is_reused_by_another_through_redis(
    app, tenant, machine_redis
):
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    one, other = SlotSetStore(machine_redis), SlotSetStore(machine_redis)
    first = availability_at(sub_account, question(tenant), NOW, one)
    statements = statements_during(
        lambda: availability_at(sub_account, question(tenant), NOW, other)
    )
    assert len(statements) == 1 and "calendar_versions" in statements[0], statements
    again = availability_at(sub_account, question(tenant), NOW, other)
    assert again.tag == first.tag
    assert again.slot_set == first.slot_set


def test_a_set_is_not_kept_when_the_calendar_changed_while_it_was_computed(
    app, tenant, monkeypatch
):
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    store = SlotSetStore()
    computed = cache.compute_slot_set
    changes = iter([True, False])

    def while_someone_writes(*args):
        result = computed(*args)
        if next(changes, False):  # a write commits between the two version reads, once
            make_blocked_time(tenant, ny(MONDAY, 9), ny(MONDAY, 10))
        return result

    monkeypatch.setattr(cache, "compute_slot_set", while_someone_writes)
    answer = availability_at(sub_account, question(tenant), NOW, store)
    version = calendar_version(tenant.sub_account_id)
    # Computed again after the change: the answer is the new version's, the 9:00 slot gone.
    assert answer.tag.startswith(f"{version:x}.")
    offered = [
        answer.slot_set.starts[i]
        for _, ids in answer.slot_set.offered_days(answer.offer)
        for i in ids
    ]
    assert int(ny(MONDAY, 9).timestamp()) not in offered
    assert len(store._local) == 1


def test_a_calendar_changing_on_every_try_is_answered_under_a_tag_that_never_matches(
    app, tenant, monkeypatch
):
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    store = SlotSetStore()
    computed = cache.compute_slot_set
    hours = iter(range(9, 17))

    def always_written_meanwhile(*args):
        result = computed(*args)
        hour = next(hours)
        make_blocked_time(tenant, ny(MONDAY, hour), ny(MONDAY, hour, 30))
        return result

    monkeypatch.setattr(cache, "compute_slot_set", always_written_meanwhile)
    answer = availability_at(sub_account, question(tenant), NOW, store)
    assert answer.tag.startswith("changing.")
    assert len(store._local) == 0


def test_without_an_answering_redis_answers_are_computed_and_redis_is_left_alone_a_while(
    app, tenant
):
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    nobody = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    store = SlotSetStore(nobody, timeout_s=0.25)
    answer = availability_at(sub_account, question(tenant), NOW, store)
    assert answer.slot_set.starts  # answered all the same
    assert store._redis_resting_until > 0
    resting_until = store._redis_resting_until
    store.forget_local()
    availability_at(sub_account, question(tenant), NOW, store)
    assert store._redis_resting_until == resting_until  # not asked again while resting
