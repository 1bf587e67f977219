"""The API keys page: an agency owner makes a key (its plain key shown once), sees the sub
account's keys, deactivates, reactivates and deletes them, and the API follows at once. Agency
users are refused; other sub accounts' keys do not exist here."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from app.dashboard import local_time
from app.extensions import db
from app.models import ApiKey, User
from app.services.accounts.api_keys import issue_api_key
from tests.dashboard_users import (
    agency_user,
    create_key,
    hidden_fields,
    keys_page,
    owner_email,
    plain_key_of,
    sign_in,
)
from tests.factories import NEW_YORK, make_sub_account

BOOKINGS = "/v1/api/calendar/bookings"
INVALID = {"statusCode": 401, "message": "Invalid or inactive API key", "code": "invalid_api_key"}


@pytest.fixture
def owner(client, tenant):
    sign_in(client, owner_email(tenant))
    return db.session.get(User, tenant.raw["agencies"][0]["ownerId"])


def post_action(client, tenant, key_id, action):
    token = hidden_fields(client, keys_page(tenant))["csrf_token"]
    return client.post(f"{keys_page(tenant)}/{key_id}/{action}", data={"csrf_token": token})


def key_named(name: str) -> ApiKey | None:
    db.session.expire_all()
    return db.session.scalar(select(ApiKey).where(ApiKey.name == name))


def key_count() -> int:
    return db.session.scalar(select(func.count()).select_from(ApiKey))


def row_of(page: str, name: str) -> str:
    (row,) = [r for r in page.split("<tr>") if f'<td data-label="Name">{name}</td>' in r]
    return row


def api(key: str) -> dict[str, str]:
    return {"x-calendar-api-key": key}


def test_a_new_key_is_shown_once_then_only_its_prefix(client, tenant, owner):
    created = create_key(client, tenant, "crm", ["canGetBookings", "canCheckAvailability"])
    assert created.status_code == 200
    assert created.headers["Cache-Control"] == "no-store"
    plain = plain_key_of(created)
    assert "navigator.clipboard.writeText" in created.get_data(as_text=True)
    stored = key_named("crm")
    assert stored.permissions == ["canCheckAvailability", "canGetBookings"]
    assert stored.created_by_user_id == owner.id and stored.sub_account_id == tenant.sub_account_id
    listed = client.get(keys_page(tenant)).get_data(as_text=True)
    assert plain not in listed and "cbk_" + plain[4:12] in listed
    assert "Check availability, Get bookings" in row_of(listed, "crm")


def test_reloading_the_new_key_page_makes_and_shows_no_other_key(client, tenant, owner):
    fields = hidden_fields(client, keys_page(tenant))
    create_key(client, tenant, "crm", ["canGetBookings"], fields=fields)
    before = key_count()
    again = create_key(client, tenant, "crm", ["canGetBookings"], fields=fields)  # same form
    assert again.status_code == 303 and again.headers["Location"] == keys_page(tenant)
    assert "cbk_" not in again.get_data(as_text=True) and key_count() == before


def test_a_new_key_works_at_the_api_for_its_permissions_only(client, tenant, owner):
    plain = plain_key_of(create_key(client, tenant, "reader", ["canGetBookings"]))
    assert client.get(BOOKINGS, headers=api(plain)).status_code == 200
    refused = client.delete(f"{BOOKINGS}/1", headers=api(plain))
    assert refused.status_code == 403
    assert refused.json == {
        "statusCode": 403,
        "message": "API key does not have 'canCancel' permission",
        "code": "permission_denied",
    }
    used = key_named("reader").last_used_at
    listed = client.get(keys_page(tenant)).get_data(as_text=True)
    assert local_time(used, "America/New_York") in row_of(listed, "reader")  # last used


def test_a_deactivated_key_is_refused_at_the_api_at_once(client, tenant, owner):
    plain = plain_key_of(create_key(client, tenant, "crm", ["canGetBookings"]))
    assert client.get(BOOKINGS, headers=api(plain)).status_code == 200
    response = post_action(client, tenant, key_named("crm").id, "deactivate")
    assert response.status_code == 302
    refused = client.get(BOOKINGS, headers=api(plain))
    assert refused.status_code == 401 and refused.json == INVALID
    listed = client.get(keys_page(tenant)).get_data(as_text=True)
    assert ">deactivated</span>" in row_of(listed, "crm")


def test_a_reactivated_key_works_again(client, tenant, owner):
    plain = plain_key_of(create_key(client, tenant, "crm", ["canGetBookings"]))
    post_action(client, tenant, key_named("crm").id, "deactivate")
    post_action(client, tenant, key_named("crm").id, "reactivate")
    assert client.get(BOOKINGS, headers=api(plain)).status_code == 200


def test_deleting_a_key_asks_first_then_the_api_refuses_it(client, tenant, owner):
    plain = plain_key_of(create_key(client, tenant, "crm", ["canGetBookings"]))
    key_id = key_named("crm").id
    confirm = client.get(f"{keys_page(tenant)}/{key_id}/delete")
    assert confirm.status_code == 200 and "Delete key for good" in confirm.get_data(as_text=True)
    assert key_named("crm") is not None  # asking deletes nothing
    assert post_action(client, tenant, key_id, "delete").status_code == 302
    assert key_named("crm") is None
    refused = client.get(BOOKINGS, headers=api(plain))
    assert refused.status_code == 401 and refused.json == INVALID


def test_the_list_shows_each_keys_status_in_words(client, tenant, owner):
    listed = client.get(keys_page(tenant)).get_data(as_text=True)
    assert ">active</span>" in row_of(listed, "all")
    assert ">expired</span>" in row_of(listed, "expired")
    assert ">deactivated</span>" in row_of(listed, "inactive")


def test_agency_level_keys_and_other_sub_accounts_keys_are_not_listed(client, tenant, owner):
    other = make_sub_account(tenant, timezone="Europe/Berlin")
    issue_api_key(
        agency=other.agency, sub_account=other, name="berlin-key", permissions=["canBook"]
    )
    db.session.commit()
    listed = client.get(keys_page(tenant)).get_data(as_text=True)
    assert "berlin-key" not in listed and "agency-level" not in listed


def test_an_expiry_in_the_past_is_refused_next_to_its_field(client, tenant, owner):
    response = create_key(client, tenant, "crm", ["canBook"], expires_at="2020-01-01T10:00")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert re.search(r'id="expires_at-errors">The expiry must be in the future\.<', page)
    assert key_named("crm") is None


def test_every_problem_is_named_at_once(client, tenant, owner):
    page = create_key(client, tenant, "", ["canFly"], "2020-01-01").get_data(as_text=True)
    assert 'id="name-errors">Give the key a name.<' in page
    assert 'id="expires_at-errors">The expiry must be in the future.<' in page
    assert "Unknown permission &#39;canFly&#39;." in page


def test_an_expiry_is_read_in_the_sub_accounts_timezone(client, tenant, owner):
    year = datetime.now(UTC).year + 1
    create_key(client, tenant, "timed", expires_at=f"{year}-06-01T17:00")
    assert key_named("timed").expires_at == datetime(year, 6, 1, 17, tzinfo=NEW_YORK)


def test_an_expiry_date_alone_lets_the_key_work_through_that_day(client, tenant, owner):
    year = datetime.now(UTC).year + 1
    create_key(client, tenant, "dated", expires_at=f"{year}-06-01")
    midnight_after = datetime(year, 6, 1, tzinfo=NEW_YORK) + timedelta(days=1)
    assert key_named("dated").expires_at == midnight_after


@pytest.mark.parametrize(
    ("name", "permissions", "expires_at", "message"),
    [
        ("", [], "", "Give the key a name."),
        ("   ", [], "", "Give the key a name."),
        ("x" * 10_000, [], "", "Use at most 255 characters."),
        ("nul\x00name", [], "", "Must not contain NUL characters."),
        ("crm", [], "31/02/2026", "Give a date (2027-03-31) or a date and time"),
        ("crm", [], "2027-02-31", "Give a date (2027-03-31) or a date and time"),
        ("crm", [], "99999-01-01", "Give a date (2027-03-31) or a date and time"),
        ("crm", ["canBook", "canFly"], "", "Unknown permission &#39;canFly&#39;."),
    ],
)
def test_typed_nonsense_is_refused_in_words_not_a_500(
    client, tenant, owner, name, permissions, expires_at, message
):
    before = key_count()
    response = create_key(client, tenant, name, permissions, expires_at)
    assert response.status_code == 200
    assert message in response.get_data(as_text=True)
    assert key_count() == before


def test_a_post_without_its_csrf_token_changes_nothing(client, tenant, owner):
    fields = hidden_fields(client, keys_page(tenant))
    refused = client.post(keys_page(tenant), data={"ticket": fields["ticket"], "name": "crm"})
    assert refused.status_code == 400 and key_named("crm") is None
    assert "did not come from this site" in refused.get_data(as_text=True)
    key_id = key_named("all").id
    client.post(f"{keys_page(tenant)}/{key_id}/deactivate")
    client.post(f"{keys_page(tenant)}/{key_id}/delete")
    assert key_named("all").active is True


def test_an_agency_user_is_refused_and_sees_no_menu_entry(client, tenant):
    helper = agency_user(tenant, tenant.sub_account_id)
    sign_in(client, helper.email)
    assert client.get(keys_page(tenant)).status_code == 403
    assert create_key(client, tenant, "sneaky", fields={}).status_code == 403
    overview = client.get(f"/dashboard/s/{tenant.sub_account_id}/").get_data(as_text=True)
    assert keys_page(tenant) not in overview and ">API keys<" not in overview
    assert key_named("sneaky") is None


def test_the_owner_sees_the_menu_entry(client, tenant, owner):
    overview = client.get(f"/dashboard/s/{tenant.sub_account_id}/").get_data(as_text=True)
    assert f'href="{keys_page(tenant)}"' in overview


def test_another_sub_accounts_key_is_not_found(client, tenant, owner):
    other = make_sub_account(tenant, timezone="Europe/Berlin")
    theirs, _ = issue_api_key(agency=other.agency, sub_account=other, name="b", permissions=[])
    db.session.commit()
    assert client.get(f"{keys_page(tenant)}/{theirs.id}/delete").status_code == 404
    assert post_action(client, tenant, theirs.id, "deactivate").status_code == 404
    assert post_action(client, tenant, theirs.id, "delete").status_code == 404
    assert key_named("b").active is True


def test_huge_ids_are_not_found(client, tenant, owner):
    assert client.get(f"{keys_page(tenant)}/{10**30}/delete").status_code == 404
    assert client.get(f"/dashboard/s/{10**30}/api-keys").status_code == 404
