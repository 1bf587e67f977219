"""Calendar connections in the dashboard, against a real Radicale: adding one (the password
stored encrypted and never shown again), testing it (the account's calendars listed to choose
from), readable failures, where a typed URL may lead (``CALDAV_ALLOW_PRIVATE``), changing,
syncing now and removing.

The apps here allow private addresses, as tests and development must (Radicale listens on
127.0.0.1), except where a test builds a strict one to see the refusal.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from app.config import load_settings
from app.extensions import db
from app.jobs.calendars import run_connection_test
from app.models import BlockedTime, CalendarConnection
from app.services.common.encryption import decrypt_secret
from app.services.integrations.calendars import connections
from tests.addresses import disguised, resolving
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import make_blocked_time, run_queued_sync
from tests.radicale_servers import radicale_server, vevent
from tests.servers import free_port

SECRET = "s3cret-calendar-pass"
# What the refusal of a private address says lifts it, on the form where a person meets it.
CALDAV_HINT = (
    "(the operator can allow calendar servers on a private network with the setting"
    " CALDAV_ALLOW_PRIVATE=1 and a restart of the service)"
)


@pytest.fixture
def app(make_app):
    app = make_app(CALDAV_ALLOW_PRIVATE=True)
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def radicale(tmp_path):
    with radicale_server(tmp_path / "radicale", users={"owner": SECRET}) as server:
        server.make_calendar("owner", "Personal")
        server.make_calendar("owner", "Work")
        yield server


def list_page(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/connections"


def page_of(tenant, connection_id) -> str:
    return f"{list_page(tenant)}/{connection_id}"


def add(client, tenant, url, **fields):
    data = {
        "name": "Personal",
        "url": url,
        "username": "owner",
        "password": SECRET,
        "calendar": "Personal",
        "write_back": "y",
        **fields,
    }
    page = list_page(tenant)
    return client.post(page, data={**data, "csrf_token": csrf_token(client, page)})


def added(client, tenant, url, **fields) -> int:
    response = add(client, tenant, url, **fields)
    assert response.status_code == 302, response.get_data(as_text=True)
    return int(response.headers["Location"].rsplit("/", 1)[1])


def act(client, tenant, connection_id, action, **data):
    page = page_of(tenant, connection_id)
    return client.post(f"{page}/{action}", data={**data, "csrf_token": csrf_token(client, page)})


def edit(client, tenant, connection_id, **fields):
    page = page_of(tenant, connection_id)
    return client.post(page, data={**fields, "csrf_token": csrf_token(client, page)})


def stored(connection_id) -> CalendarConnection | None:
    db.session.expire_all()
    return db.session.get(CalendarConnection, connection_id)


def event(uid: str, start: datetime, end: datetime) -> str:
    return vevent(
        uid, f"DTSTART:{start:%Y%m%dT%H%M%SZ}", f"DTEND:{end:%Y%m%dT%H%M%SZ}", "SUMMARY:Dentist"
    )


def test_a_connection_is_added_and_its_password_never_shown_again(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    connection = stored(connection_id)
    assert (connection.name, connection.url, connection.calendar) == (
        "Personal",
        radicale.url,
        "Personal",
    )
    assert connection.write_back is True and SECRET not in connection.encrypted_secret
    assert decrypt_secret(connection.encrypted_secret, ["test-secret-key"]) == SECRET
    pages = [
        signed_in.get(list_page(tenant)),
        signed_in.get(page_of(tenant, connection_id)),
        shown_after_a_test(signed_in, tenant, connection_id),
    ]
    for page in pages:
        text = page.get_data(as_text=True)
        assert page.status_code == 200 and SECRET not in text
        assert connection.encrypted_secret not in text
    assert "Personal" in pages[0].get_data(as_text=True)


TESTED_AT = datetime(2030, 1, 1, tzinfo=UTC)  # when the worker ran a test: only shown


def shown_after_a_test(client, tenant, connection_id):
    """ "Test connection" as a person sees it: asked for, run by the worker, then the page."""
    asked = act(client, tenant, connection_id, "test")
    assert asked.status_code == 302, asked.get_data(as_text=True)
    run_connection_test(connection_id, now=TESTED_AT)
    return client.get(asked.headers["Location"])


def test_the_test_is_run_by_the_worker_and_shown_when_it_arrives(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url, calendar="")
    asked = act(signed_in, tenant, connection_id, "test")
    waiting = signed_in.get(asked.headers["Location"]).get_data(as_text=True)
    assert "Testing the connection" in waiting and 'hx-trigger="every 2s"' in waiting
    run_connection_test(connection_id, now=TESTED_AT)
    part = signed_in.get(
        page_of(tenant, connection_id) + "?part=test", headers={"HX-Request": "true"}
    ).get_data(as_text=True)
    assert part.lstrip().startswith('<section id="test"') and "hx-trigger" not in part
    assert "the server lists 2 calendars" in part


def test_test_lists_the_accounts_calendars_and_stores_nothing(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url, calendar="")
    response = shown_after_a_test(signed_in, tenant, connection_id)
    text = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "the server lists 2 calendars" in text and "Personal" in text and "Work" in text
    assert text.count("Use this calendar") == 2
    assert stored(connection_id).last_attempt_at is None


def test_a_calendar_chosen_from_the_test_is_used(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url, calendar="")
    work = next(
        c
        for c in radicale.client("owner", SECRET).principal().get_calendars()
        if c.get_display_name() == "Work"
    )
    response = act(signed_in, tenant, connection_id, "calendar", calendar=str(work.url))
    assert response.status_code == 302
    assert stored(connection_id).calendar == str(work.url)
    start = (datetime.now(UTC) + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    work.add_event(event("work-meeting", start, start + timedelta(hours=1)))
    act(signed_in, tenant, connection_id, "sync")
    run_queued_sync(connection_id)
    assert stored(connection_id).busy_count == 1
    text = shown_after_a_test(signed_in, tenant, connection_id).get_data(as_text=True)
    assert "In use" in text and text.count("Use this calendar") == 1


def test_a_wrong_password_is_a_readable_error(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url, password="not-the-password")
    response = shown_after_a_test(signed_in, tenant, connection_id)
    text = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "Test failed: " in text and "rejected the username or password (HTTP 401)" in text
    assert "not-the-password" not in text


def test_an_unreachable_server_is_a_readable_error(signed_in, tenant):
    connection_id = added(signed_in, tenant, f"http://127.0.0.1:{free_port()}/")
    text = shown_after_a_test(signed_in, tenant, connection_id).get_data(as_text=True)
    assert "Test failed: cannot connect to http://127.0.0.1" in text


def test_a_private_url_is_refused_unless_allowed(make_app, tenant, radicale):
    strict = make_app(CALDAV_ALLOW_PRIVATE=False).test_client()
    sign_in(strict, owner_email(tenant))
    for url in (radicale.url, "http://169.254.169.254/latest/", "http://[::1]:8080/"):
        response = add(strict, tenant, url)
        assert response.status_code == 200
        assert "which is not a public address" in response.get_data(as_text=True), url
    assert db.session.scalar(select(func.count()).select_from(CalendarConnection)) == 0


def test_a_calendar_url_leading_to_a_private_address_is_refused(make_app, tenant):
    strict = make_app(CALDAV_ALLOW_PRIVATE=False).test_client()
    sign_in(strict, owner_email(tenant))
    response = add(strict, tenant, "https://93.184.215.14/dav/", calendar="//127.0.0.1/owner/x/")
    text = response.get_data(as_text=True)
    assert response.status_code == 200
    assert '<p class="error" id="calendar-errors">127.0.0.1 resolves to 127.0.0.1' in text


@disguised
def test_a_url_spelling_a_private_address_is_refused(make_app, tenant, address):
    strict = make_app(CALDAV_ALLOW_PRIVATE=False).test_client()
    sign_in(strict, owner_email(tenant))
    response = add(strict, tenant, f"http://[{address}]:5232/")
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert re.search(r'id="url-errors">[^<]*which is not a public address', text)
    assert db.session.scalar(select(func.count()).select_from(CalendarConnection)) == 0


def test_the_refusal_says_how_the_operator_allows_private_servers(make_app, tenant):
    strict = make_app(CALDAV_ALLOW_PRIVATE=False).test_client()
    sign_in(strict, owner_email(tenant))
    text = add(strict, tenant, "http://127.0.0.1:5232/").get_data(as_text=True)
    hint = re.escape(f"{CALDAV_HINT}.")
    assert re.search(rf'id="url-errors">[^<]*{hint}', text)


@pytest.mark.parametrize(
    ("action", "shown"), [("test", "Test failed: url: "), ("sync", "Not synced: url: ")]
)
def test_a_name_that_turns_into_a_disguised_address_is_refused_before_connecting(
    make_app, signed_in, tenant, monkeypatch, action, shown
):
    """Added while it resolved to loopback (allowed); tested or synced once DNS answers a
    disguise: refused, saying why and which setting allows it, without connecting."""
    answers = {"caldav.example.test": ["127.0.0.1"]}
    resolving(monkeypatch, answers)
    connection_id = added(signed_in, tenant, "http://caldav.example.test:5232/")

    def connecting(*args, **kwargs):
        raise AssertionError("connected to a refused address")

    monkeypatch.setattr(connections, "connection_access", connecting)
    monkeypatch.setattr(connections, "request_sync", connecting)
    answers["caldav.example.test"] = ["64:ff9b::7f00:1"]
    strict = make_app(CALDAV_ALLOW_PRIVATE=False).test_client()
    sign_in(strict, owner_email(tenant))
    response = act(strict, tenant, connection_id, action)
    if response.status_code == 302:  # "sync now" says it on the page it redirects to
        response = strict.get(response.headers["Location"])
    text = response.get_data(as_text=True)
    assert f"{shown}Caldav.example.test resolves to 64:ff9b::7f00:1" in text
    assert CALDAV_HINT in text


def test_caldav_allow_private_is_read_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CALDAV_ALLOW_PRIVATE", raising=False)
    # Named, so that loading the settings starts no embedded PostgreSQL; nothing connects.
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:9/unused")
    assert load_settings(tmp_path).caldav_allow_private is False
    monkeypatch.setenv("CALDAV_ALLOW_PRIVATE", "1")
    assert load_settings(tmp_path).caldav_allow_private is True


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("url", "not a url", "Must be an http:// or https:// URL."),
        ("url", "http://owner:pw@127.0.0.1/", "Must not contain credentials"),
        ("url", "http://" + "h" * 10_000 + "/", "Longer than maximum length 1000."),
        ("name", "", "Length must be between 1 and 255."),
        ("username", "u" * 10_000, "Length must be between 1 and 255."),
        ("password", "", "Length must be between 1 and 1024."),
    ],
)
def test_bad_fields_are_explained_not_a_500(signed_in, tenant, field, value, message):
    response = add(signed_in, tenant, **{"url": "http://127.0.0.1:1/", field: value})
    assert response.status_code == 200
    assert message in response.get_data(as_text=True)
    assert db.session.scalar(select(func.count()).select_from(CalendarConnection)) == 0


def test_a_second_connection_of_the_same_name_is_refused(signed_in, tenant, radicale):
    added(signed_in, tenant, radicale.url)
    response = add(signed_in, tenant, radicale.url)
    assert response.status_code == 200
    assert "Duplicate name &#39;Personal&#39;." in response.get_data(as_text=True)


def test_sync_now_is_read_by_the_worker_and_its_page_shows_the_result(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    run_queued_sync(connection_id)  # the first read, asked for when it was added
    personal = next(
        c
        for c in radicale.client("owner", SECRET).principal().get_calendars()
        if c.get_display_name() == "Personal"
    )
    start = (datetime.now(UTC) + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    personal.add_event(event(f"dentist-{uuid.uuid4().hex}", start, start + timedelta(hours=1)))
    response = act(signed_in, tenant, connection_id, "sync")
    assert response.status_code == 302
    page = signed_in.get(page_of(tenant, connection_id)).get_data(as_text=True)
    assert "Sync queued" in page and 'hx-trigger="every 2s"' in page  # it looks again
    assert stored(connection_id).sync_requested_at is not None

    run_queued_sync(connection_id)
    busy = db.session.execute(
        select(BlockedTime.start_at, BlockedTime.end_at).where(
            BlockedTime.calendar_connection_id == connection_id
        )
    ).all()
    assert busy == [(start, start + timedelta(hours=1))]
    health = signed_in.get(page_of(tenant, connection_id), headers={"HX-Request": "true"})
    text = health.get_data(as_text=True)
    assert text.lstrip().startswith('<section id="health"')  # the section alone
    assert "hx-trigger" not in text and "Sync queued" not in text
    assert "<dt>Busy periods stored</dt><dd>1</dd>" in text
    assert "By polling, every 60 seconds" in text


def test_a_failed_sync_is_explained_and_recorded(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    radicale.stop()
    run_queued_sync(connection_id)
    text = signed_in.get(page_of(tenant, connection_id)).get_data(as_text=True)
    assert "cannot connect to http://127.0.0.1" in text
    assert "Failing</span> (1 in a row)" in text
    assert stored(connection_id).consecutive_failures == 1


def test_write_back_and_active_are_switched_off_keeping_the_password(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    secret_before = stored(connection_id).encrypted_secret
    response = edit(
        signed_in,
        tenant,
        connection_id,
        name="Personal",
        url=radicale.url,
        username="owner",
        calendar="Personal",
    )
    assert response.status_code == 302
    connection = stored(connection_id)
    assert connection.write_back is False and connection.active is False
    assert connection.encrypted_secret == secret_before
    text = signed_in.get(page_of(tenant, connection_id)).get_data(as_text=True)
    assert "Inactive" in text and SECRET not in text


def test_another_server_needs_the_password_again(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    elsewhere = f"http://127.0.0.1:{free_port()}/"
    fields = {"name": "Personal", "url": elsewhere, "username": "owner", "active": "y"}
    refused = edit(signed_in, tenant, connection_id, **fields)
    assert refused.status_code == 200
    assert "Enter the password again" in refused.get_data(as_text=True)
    assert stored(connection_id).url == radicale.url
    new_password = "a-new-calendar-pass"
    accepted = edit(signed_in, tenant, connection_id, **fields, password=new_password)
    assert accepted.status_code == 302
    connection = stored(connection_id)
    assert connection.url == elsewhere
    assert decrypt_secret(connection.encrypted_secret, ["test-secret-key"]) == new_password


def test_a_password_typed_into_a_refused_form_is_not_shown_back(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    response = edit(signed_in, tenant, connection_id, name="", url=radicale.url, password=SECRET)
    assert response.status_code == 200 and SECRET not in response.get_data(as_text=True)


def test_removing_deletes_the_connection_and_its_busy_time(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    make_blocked_time(
        tenant,
        start,
        start + timedelta(hours=1),
        source="external",
        calendar_connection_id=connection_id,
        external_uid="school-run",
    )
    response = act(signed_in, tenant, connection_id, "remove")
    assert response.status_code == 302 and response.headers["Location"] == list_page(tenant)
    assert stored(connection_id) is None
    assert db.session.scalar(select(func.count()).select_from(BlockedTime)) == 0


def test_an_action_without_its_csrf_token_changes_nothing(signed_in, tenant, radicale):
    connection_id = added(signed_in, tenant, radicale.url)
    signed_in.post(f"{page_of(tenant, connection_id)}/remove")
    assert stored(connection_id) is not None


def test_another_sub_accounts_connection_is_not_found(client, tenants, radicale):
    mine, theirs = tenants.create(), tenants.create()
    sign_in(client, owner_email(theirs))
    connection_id = added(client, theirs, radicale.url)
    client.post("/logout", data={"csrf_token": csrf_token(client, list_page(theirs))})
    sign_in(client, owner_email(mine))
    token = csrf_token(client, list_page(mine))
    page = page_of(mine, connection_id)  # their connection's id, under my sub account
    assert client.get(page).status_code == 404
    for action in ("", "/test", "/sync", "/calendar", "/remove"):
        assert client.post(f"{page}{action}", data={"csrf_token": token}).status_code == 404
    assert stored(connection_id) is not None
    assert client.get(page_of(mine, 99999999999999999999)).status_code == 404
