"""API-key authentication: the spec's exact 401 and 403 answers."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import ApiKey, Permission, SubAccount
from app.services.accounts.api_keys import require_permission
from app.services.common.errors import PermissionDenied

BOOKINGS = "/v1/api/calendar/bookings"


def get_bookings(client, headers):
    return client.get(BOOKINGS, headers=headers)


# The code each of the spec's 401 and 403 answers carries (tests/api/test_error_codes.py).
CODES = {
    "Invalid or inactive API key": "invalid_api_key",
    "API key has expired": "api_key_expired",
    "API key not associated with a subaccount": "no_sub_account",
}


def assert_error(response, status, message):
    assert response.status_code == status
    code = CODES.get(message, "permission_denied")
    assert response.json == {"statusCode": status, "message": message, "code": code}


def test_missing_key_is_401_invalid(client, tenant):
    assert_error(get_bookings(client, {}), 401, "Invalid or inactive API key")


def test_empty_key_is_401_invalid(client, tenant):
    assert_error(
        get_bookings(client, {"x-calendar-api-key": ""}), 401, "Invalid or inactive API key"
    )


def test_unknown_key_is_401_invalid(client, tenant):
    response = get_bookings(client, {"x-calendar-api-key": tenant.keys["all"] + "x"})
    assert_error(response, 401, "Invalid or inactive API key")


def test_deactivated_key_is_401_invalid(client, tenant):
    assert_error(
        get_bookings(client, tenant.headers("inactive")), 401, "Invalid or inactive API key"
    )


def test_deactivating_a_key_takes_effect_on_the_next_request(client, tenant):
    assert get_bookings(client, tenant.headers()).status_code == 200
    key = db.session.scalar(select(ApiKey).where(ApiKey.name == "all"))
    key.active = False
    db.session.commit()
    assert_error(get_bookings(client, tenant.headers()), 401, "Invalid or inactive API key")


def test_expired_key_is_401_expired(client, tenant):
    assert_error(get_bookings(client, tenant.headers("expired")), 401, "API key has expired")


def test_agency_level_key_is_401_no_sub_account(client, tenant):
    response = get_bookings(client, tenant.headers("agency-level"))
    assert_error(response, 401, "API key not associated with a subaccount")


def test_key_of_deactivated_sub_account_is_401_no_sub_account(client, tenant):
    db.session.get(SubAccount, tenant.sub_account_id).active = False
    db.session.commit()
    response = get_bookings(client, tenant.headers())
    assert_error(response, 401, "API key not associated with a subaccount")


def test_auth_is_checked_before_query_validation(client, tenant):
    response = client.get(BOOKINGS + "?limit=0", headers={"x-calendar-api-key": "nope"})
    assert_error(response, 401, "Invalid or inactive API key")


def test_list_without_can_get_bookings_is_403(client, tenant):
    response = get_bookings(client, tenant.headers("without-canGetBookings"))
    assert_error(response, 403, "API key does not have 'canGetBookings' permission")


def test_get_one_without_can_get_bookings_is_403(client, tenant):
    response = client.get(BOOKINGS + "/1", headers=tenant.headers("none"))
    assert_error(response, 403, "API key does not have 'canGetBookings' permission")


@pytest.mark.parametrize("permission", list(Permission))
def test_permission_denied_message_names_the_permission(permission):
    key = ApiKey(permissions=[p.value for p in Permission if p != permission])
    with pytest.raises(PermissionDenied) as denied:
        require_permission(key, permission)
    assert denied.value.message == f"API key does not have '{permission.value}' permission"
    assert denied.value.status_code == 403


def test_keys_are_stored_as_sha256_digest_only(app, tenant):
    plain = tenant.keys["all"]
    key = db.session.scalar(select(ApiKey).where(ApiKey.name == "all"))
    assert key.digest == hashlib.sha256(plain.encode()).hexdigest()
    assert plain.startswith(key.prefix) and len(key.prefix) < len(plain) // 2
    stored = [str(v) for k in db.session.scalars(select(ApiKey)) for v in vars(k).values()]
    assert not any(plain in value for value in stored)


def test_successful_request_records_last_used(client, tenant):
    assert get_bookings(client, tenant.headers()).status_code == 200
    db.session.expire_all()
    key = db.session.scalar(select(ApiKey).where(ApiKey.name == "all"))
    assert key.last_used_at is not None
