"""``flask connections list|add|test|sync|remove`` against a real Radicale."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import BlockedTime, CalendarConnection
from app.models.types import utcnow
from tests.factories import make_blocked_time
from tests.radicale_servers import radicale_server

SECRET = "s3cret-calendar-pass"


@pytest.fixture
def radicale(tmp_path):
    with radicale_server(tmp_path / "radicale", users={"owner": SECRET}) as server:
        server.make_calendar("owner", "Personal")
        yield server


def run(app, *args, input=None):
    return app.test_cli_runner().invoke(args=["connections", *args], input=input)


def add_arguments(tenant, radicale, *extra) -> list[str]:
    """``connections add`` of the owner's account on ``radicale``, named Personal."""
    sub_account = str(tenant.sub_account_id)
    owner = ["--url", radicale.url, "--username", "owner"]
    return ["add", sub_account, "--name", "Personal", *owner, *extra]


def add(app, tenant, radicale, *extra):
    arguments = add_arguments(tenant, radicale, "--calendar", "Personal", *extra)
    result = run(app, *arguments, input=f"{SECRET}\n")
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_add_asks_for_the_password_and_never_shows_it(app, tenant, radicale):
    added = add(app, tenant, radicale)
    assert added["name"] == "Personal" and added["writeBack"] is True
    listed = run(app, "list")
    assert listed.exit_code == 0
    assert SECRET not in listed.output
    assert [json.loads(line)["id"] for line in listed.output.splitlines()] == [added["id"]]
    stored = db.session.get(CalendarConnection, added["id"])
    assert stored.encrypted_secret and SECRET not in stored.encrypted_secret


def test_a_second_connection_of_the_same_name_is_refused(app, tenant, radicale):
    add(app, tenant, radicale)
    result = run(app, *add_arguments(tenant, radicale, "--password", SECRET))
    assert result.exit_code != 0 and "Duplicate name 'Personal'" in result.output


def test_test_reaches_the_calendar_and_stores_nothing(app, tenant, radicale):
    added = add(app, tenant, radicale)
    result = run(app, "test", str(added["id"]))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["status"] == "probed"
    assert db.session.get(CalendarConnection, added["id"]).last_attempt_at is None


def test_sync_runs_now_and_reports(app, tenant, radicale):
    added = add(app, tenant, radicale)
    result = run(app, "sync", str(added["id"]))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["ok"] is True
    db.session.expire_all()
    assert db.session.get(CalendarConnection, added["id"]).last_success_at is not None


def test_a_failing_sync_exits_non_zero_with_the_error(app, tenant, radicale):
    add(app, tenant, radicale)
    radicale.stop()
    result = run(app, "sync", "--all")
    assert result.exit_code == 1
    assert json.loads(result.output)["ok"] is False


def test_remove_deletes_the_connection_and_its_busy_time(app, tenant, radicale):
    added = add(app, tenant, radicale)
    start = utcnow().replace(microsecond=0) + timedelta(days=1)
    make_blocked_time(
        tenant,
        start,
        start + timedelta(hours=1),
        source="external",
        calendar_connection_id=added["id"],
        external_uid="school-run",
    )
    assert run(app, "remove", str(added["id"])).exit_code == 0
    db.session.expire_all()
    assert db.session.get(CalendarConnection, added["id"]) is None
    remaining = select(func.count()).select_from(BlockedTime)
    assert (
        db.session.scalar(remaining.where(BlockedTime.calendar_connection_id == added["id"])) == 0
    )


def test_an_unknown_connection_is_an_error(app):
    result = run(app, "sync", "999999")
    assert result.exit_code != 0 and "Calendar connection not found" in result.output


def test_list_shows_sync_and_write_back_health(app, tenant, radicale):
    added = add(app, tenant, radicale)
    radicale.stop()
    run(app, "sync", str(added["id"]))
    connection = db.session.get(CalendarConnection, added["id"])
    connection.last_write_at = utcnow()
    connection.last_write_error = "cannot connect to http://127.0.0.1"
    connection.last_write_error_at = utcnow()
    db.session.commit()
    (listed,) = [json.loads(line) for line in run(app, "list").output.splitlines()]
    assert listed["consecutiveFailures"] == 1
    assert "Connection refused" in listed["lastError"]
    assert listed["lastWriteAt"] and listed["lastWriteErrorAt"]
    assert listed["lastWriteError"] == "cannot connect to http://127.0.0.1"


def test_add_subscribes_to_a_feed_without_credentials(app, tenant):
    sub_account = str(tenant.sub_account_id)
    url = "webcal://calendar.example.test/secret-address/basic.ics"
    result = run(app, "add", sub_account, "--name", "Rota", "--kind", "ics", "--url", url)
    assert result.exit_code == 0, result.output
    added = json.loads(result.output.strip().splitlines()[-1])
    assert (added["kind"], added["url"], added["writeBack"]) == ("ics", url, False)
    refused = run(app, "add", sub_account, "--name", "Other", "--kind", "ics", "--url", "ftp://x")
    assert refused.exit_code != 0 and "url" in refused.output


def test_list_prints_each_field_in_its_order_and_instants_in_utc(app, tenant):
    """The line, byte for byte: the keys in their order, an instant as ``…Z`` or null."""
    sub_account = str(tenant.sub_account_id)
    url = "https://calendar.example.test/rota.ics"
    run(app, "add", sub_account, "--name", "Rota", "--kind", "ics", "--url", url)
    connection = db.session.scalars(select(CalendarConnection)).one()
    connection.last_attempt_at = datetime(2031, 3, 4, 12, 0, 5, 250000, tzinfo=UTC)
    connection.last_error = "refused"
    connection.needs_action = "reconnect"
    db.session.commit()
    expected = {
        "id": connection.id,
        "subAccountId": tenant.sub_account_id,
        "name": "Rota",
        "kind": "ics",
        "url": url,
        "username": None,
        "calendar": None,
        "writeBack": False,
        "active": True,
        "lastAttemptAt": "2031-03-04T12:00:05Z",
        "lastSuccessAt": None,
        "lastError": "refused",
        "lastErrorAt": None,
        "busyCount": connection.busy_count,
        "skippedEvents": connection.skipped_count,
        "skippedReason": None,
        "consecutiveFailures": connection.consecutive_failures,
        "lastWriteAt": None,
        "lastWriteError": None,
        "lastWriteErrorAt": None,
        "writingExistingBookings": False,
        "needsAction": "reconnect",
        "actionMailedAt": None,
    }
    assert run(app, "list").output == json.dumps(expected) + "\n"
