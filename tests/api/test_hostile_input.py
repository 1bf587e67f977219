"""Input an agent might send by mistake or on purpose: every answer is a 4xx envelope, never a
500 or a stack trace."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.factories import make_booking, next_monday, ny, z

MONDAY = next_monday()


@pytest.fixture
def create_url(tenant):
    return f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"


@pytest.fixture
def booking(tenant):
    return make_booking(tenant, ny(MONDAY, 10))


def valid_body(**extra):
    start = ny(MONDAY, 12)
    return {
        "startTime": z(start),
        "endTime": z(start + timedelta(minutes=30)),
        "attendees": [{"email": "pat@example.test"}],
        **extra,
    }


def assert_4xx(response, status=400):
    assert response.status_code == status, response.get_data(as_text=True)[:300]
    assert response.is_json
    body = response.json
    assert body["statusCode"] == status and isinstance(body["message"], str)
    assert "Traceback" not in response.get_data(as_text=True)
    return body


def post_raw(client, url, tenant, data, content_type="application/json"):
    return client.post(url, data=data, content_type=content_type, headers=tenant.headers())


@pytest.mark.date_sensitive
def test_body_over_one_mebibyte_is_413(client, tenant, create_url):
    big = valid_body(description="x" * (1024 * 1024))
    assert_4xx(post_raw(client, create_url, tenant, json.dumps(big)), 413)


@pytest.mark.date_sensitive
@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_non_json_content_type_is_400(client, tenant, create_url, content_type):
    body = assert_4xx(post_raw(client, create_url, tenant, json.dumps(valid_body()), content_type))
    assert body["message"] == "Request body must be JSON (Content-Type: application/json)"


@pytest.mark.date_sensitive
def test_update_without_json_is_400_not_a_no_op(client, tenant, booking):
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking.id}"
    assert_4xx(client.put(url, data="title=x", content_type="text/plain", headers=tenant.headers()))
    assert_4xx(client.put(url, headers=tenant.headers()))


@pytest.mark.date_sensitive
def test_cancel_with_a_non_json_body_is_400(client, tenant, booking):
    response = client.delete(
        f"/v1/api/calendar/bookings/{booking.id}",
        data="reason=x",
        content_type="text/plain",
        headers=tenant.headers(),
    )
    assert_4xx(response)


def test_missing_body_is_400(client, tenant, create_url):
    assert assert_4xx(client.post(create_url, headers=tenant.headers()))["message"] == (
        "Request body must be JSON (Content-Type: application/json)"
    )
    assert (
        assert_4xx(post_raw(client, create_url, tenant, b""))["message"]
        == "Request body must be a JSON object"
    )


@pytest.mark.parametrize("document", ["[]", '"text"', "42", "null", "true", '[{"startTime": 1}]'])
def test_json_that_is_not_an_object_is_400(client, tenant, create_url, document):
    assert (
        assert_4xx(post_raw(client, create_url, tenant, document))["message"]
        == "Request body must be a JSON object"
    )


@pytest.mark.parametrize("document", ["{not json", '{"a": 1,}', "{'a': 1}", '{"a": "\\ud800"x}'])
def test_malformed_json_is_400(client, tenant, create_url, document):
    assert (
        assert_4xx(post_raw(client, create_url, tenant, document))["message"] == "Invalid JSON body"
    )


def test_invalid_utf8_is_400(client, tenant, create_url):
    assert_4xx(post_raw(client, create_url, tenant, b'{"title": "\xff\xfe"}'))


def test_integer_beyond_the_parsers_digit_limit_is_400(client, tenant, create_url):
    data = '{"metadata": {"n": ' + "9" * 5000 + "}}"
    assert assert_4xx(post_raw(client, create_url, tenant, data))["message"] == "Invalid JSON body"


@pytest.mark.parametrize(
    "number", ["1e400", "-1e400", "NaN", "Infinity", str(2**63), str(-(2**53))]
)
def test_huge_or_non_finite_numbers_in_metadata_are_400(client, tenant, create_url, number):
    data = '{"startTime": "x", "metadata": {"n": ' + number + "}}"
    body = assert_4xx(post_raw(client, create_url, tenant, data))
    assert "metadata.n" in body["errors"]


@pytest.mark.date_sensitive
@pytest.mark.parametrize("field", ["title", "description", "idempotencyKey"])
def test_nul_characters_are_400(client, tenant, create_url, field):
    body = assert_4xx(
        client.post(create_url, json=valid_body(**{field: "a\x00b"}), headers=tenant.headers())
    )
    assert field in body["errors"]


@pytest.mark.date_sensitive
def test_nul_in_attendee_and_metadata_is_400(client, tenant, create_url):
    payload = valid_body(attendees=[{"email": "a@example.test", "name": "A\x00"}])
    assert (
        "attendees[0].name"
        in assert_4xx(client.post(create_url, json=payload, headers=tenant.headers()))["errors"]
    )
    payload = valid_body(metadata={"k": "v\x00"})
    assert (
        "metadata.k"
        in assert_4xx(client.post(create_url, json=payload, headers=tenant.headers()))["errors"]
    )
    payload = valid_body(metadata={"k\x00": "v"})
    assert (
        "metadata"
        in assert_4xx(client.post(create_url, json=payload, headers=tenant.headers()))["errors"]
    )


@pytest.mark.date_sensitive
@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "x\\udc00y"])
def test_lone_surrogates_are_400(client, tenant, create_url, escape):
    body = json.dumps(valid_body())[:-1]
    for extra, field in (
        (f', "title": "{escape}"', "title"),
        (f', "description": "{escape}"', "description"),
        (f', "metadata": {{"k": "{escape}"}}', "metadata.k"),
        (f', "metadata": {{"{escape}": 1}}', "metadata"),
        (
            f', "attendees": [{{"email": "a@example.test", "name": "{escape}"}}]',
            "attendees[0].name",
        ),
    ):
        response = post_raw(client, create_url, tenant, body + extra + "}")
        assert field in assert_4xx(response)["errors"], field


def test_nul_in_a_query_value_is_400(client, tenant):
    assert_4xx(
        client.get("/v1/api/calendar/bookings?email=a%00b@example.test", headers=tenant.headers())
    )


@pytest.mark.date_sensitive
def test_nested_metadata_is_400(client, tenant, create_url):
    nested = {"level": 0}
    for level in range(1, 60):
        nested = {"level": level, "inner": nested}
    body = assert_4xx(
        client.post(create_url, json=valid_body(metadata=nested), headers=tenant.headers())
    )
    assert "metadata.inner" in body["errors"]


def test_nesting_deeper_than_the_parser_allows_is_400(client, tenant, create_url):
    data = '{"metadata": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert assert_4xx(post_raw(client, create_url, tenant, data))["message"] == "Invalid JSON body"


@pytest.mark.date_sensitive
def test_unknown_fields_are_400_naming_them(client, tenant, create_url):
    body = assert_4xx(
        client.post(
            create_url, json=valid_body(colour="red", location="x"), headers=tenant.headers()
        )
    )
    assert body["errors"] == {"colour": ["Unknown field."], "location": ["Unknown field."]}


@pytest.mark.date_sensitive
def test_unknown_attendee_fields_are_400(client, tenant, create_url):
    payload = valid_body(attendees=[{"email": "a@example.test", "role": "boss"}])
    assert (
        "attendees[0].role"
        in assert_4xx(client.post(create_url, json=payload, headers=tenant.headers()))["errors"]
    )


@pytest.mark.parametrize(
    "path",
    [
        "/v1/api/calendar/bookings/" + "9" * 25,
        "/v1/api/calendar/bookings/9223372036854775808",
        "/v1/api/calendar/bookings/2147483648",
        "/v1/api/calendar/bookings/-1",
        "/v1/api/calendar/bookings/0",
        "/v1/api/calendar/bookings/1.5",
        "/v1/api/calendar/bookings/%00",
    ],
)
def test_odd_path_ids_are_404(client, tenant, path):
    assert_4xx(client.get(path, headers=tenant.headers()), 404)


@pytest.mark.date_sensitive
@pytest.mark.parametrize("method", ["put", "delete"])
def test_id_beyond_the_id_columns_is_404_for_writes(client, tenant, booking, method):
    url = (
        f"/v1/api/calendar/event-types/2147483648/bookings/{booking.id}"
        if method == "put"
        else "/v1/api/calendar/bookings/2147483648"
    )
    response = getattr(client, method)(
        url, json={"title": "x"} if method == "put" else None, headers=tenant.headers()
    )
    assert_4xx(response, 404)


@pytest.mark.date_sensitive
def test_event_type_id_beyond_the_id_columns_in_a_query_is_400(client, tenant):
    query = f"startDate={MONDAY}&endDate={MONDAY}&eventTypeId=2147483648"
    assert_4xx(client.get(f"/v1/api/calendar/availability?{query}", headers=tenant.headers()))
    assert_4xx(
        client.get("/v1/api/calendar/bookings?eventTypeId=2147483648", headers=tenant.headers())
    )


@pytest.mark.date_sensitive
def test_overflowing_event_type_id_in_a_write_path_is_404(client, tenant):
    url = "/v1/api/calendar/event-types/" + "9" * 30 + "/bookings"
    assert_4xx(client.post(url, json=valid_body(), headers=tenant.headers()), 404)


@pytest.mark.parametrize(
    "query",
    ["limit=5&limit=6", "status=pending&status=confirmed", "email=a@x.test&email=b@x.test"],
)
def test_repeated_query_values_are_400(client, tenant, query):
    body = assert_4xx(client.get(f"/v1/api/calendar/bookings?{query}", headers=tenant.headers()))
    assert list(body["errors"]) == [query.split("=")[0]]


@pytest.mark.parametrize(
    "name", ["startDate", "endDate", "status", "eventTypeId", "email", "limit", "offset"]
)
def test_empty_list_query_values_are_400(client, tenant, name):
    body = assert_4xx(client.get(f"/v1/api/calendar/bookings?{name}=", headers=tenant.headers()))
    assert name in body["errors"]


@pytest.mark.date_sensitive
@pytest.mark.parametrize("name", ["eventTypeId", "duration", "timezone"])
def test_empty_availability_query_values_are_400(client, tenant, name):
    query = f"startDate={MONDAY}&endDate={MONDAY}&{name}="
    body = assert_4xx(
        client.get(f"/v1/api/calendar/availability?{query}", headers=tenant.headers())
    )
    assert name in body["errors"]


@pytest.mark.date_sensitive
@pytest.mark.parametrize(
    "value", ["0001-01-01T00:00:00+14:00", "9999-12-31", "1899-12-31", "2200-01-01T00:00:00Z"]
)
def test_instants_outside_the_supported_years_are_400(client, tenant, create_url, value):
    body = assert_4xx(
        client.get(
            f"/v1/api/calendar/availability?startDate={value}&endDate={value}",
            headers=tenant.headers(),
        )
    )
    assert "startDate" in body["errors"]
    payload = valid_body(startTime=value)
    assert (
        "startTime"
        in assert_4xx(client.post(create_url, json=payload, headers=tenant.headers()))["errors"]
    )


def test_huge_api_key_header_is_401(client):
    response = client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": "k" * 10_000})
    assert_4xx(response, 401)


def test_huge_limit_and_offset_are_400(client, tenant):
    for query in ("limit=" + "9" * 40, "offset=" + "9" * 40, "eventTypeId=" + "9" * 40):
        assert_4xx(client.get(f"/v1/api/calendar/bookings?{query}", headers=tenant.headers()))
