"""The OpenAPI document and the interactive docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.api.error_codes import ERROR_CODES, codes_table
from app.config import settings_of
from app.scheduling.timezones import (
    MAX_YEAR,
    MIN_YEAR,
    InvalidInstant,
    is_timezone,
    read_instant,
)
from app.services.common.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[2]

# (path, method, the error statuses it documents besides 401/403 and the default)
OPERATIONS = [
    ("/v1/api/calendar/availability", "get", ["400", "404"]),
    ("/v1/api/calendar/bookings", "get", ["400"]),
    ("/v1/api/calendar/event-types", "get", []),
    ("/v1/api/calendar/bookings/{booking_id}", "get", ["404"]),
    ("/v1/api/calendar/bookings/{booking_id}", "delete", ["400", "404"]),
    ("/v1/api/calendar/event-types/{event_type_id}/bookings", "post", ["400", "404"]),
    ("/v1/api/calendar/event-types/{event_type_id}/bookings/{booking_id}", "put", ["400", "404"]),
    ("/v1/api/calendar/event-types/{event_type_id}/holds", "post", ["400", "404"]),
    ("/v1/api/calendar/event-types/{event_type_id}/holds/{hold_id}", "delete", ["404"]),
]


@pytest.fixture
def spec(client):
    response = client.get("/v1/api/openapi.json")
    assert response.status_code == 200
    return response.json


def test_document_is_openapi_3(spec):
    assert spec["openapi"].startswith("3.")
    assert spec["info"]["title"] == "Calendar Booking API"


def test_declares_the_api_key_security_scheme(spec):
    assert spec["components"]["securitySchemes"]["ApiKeyAuth"] == {
        "type": "apiKey",
        "in": "header",
        "name": "x-calendar-api-key",
    }


@pytest.mark.parametrize("path, method, errors", OPERATIONS)
def test_every_operation_requires_the_key_and_documents_its_errors(spec, path, method, errors):
    operation = spec["paths"][path][method]
    assert operation["security"] == [{"ApiKeyAuth": []}]
    for status in ("401", "403", "default", *errors):
        assert status in operation["responses"], status


def test_every_operation_is_listed_here(spec):
    documented = {(p, m) for p, ops in spec["paths"].items() for m in ops if m != "parameters"}
    assert documented == {(p, m) for p, m, _ in OPERATIONS}


def test_error_responses_use_the_envelope_schema(spec):
    error = spec["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"statusCode", "message", "code"}
    operation = spec["paths"]["/v1/api/calendar/bookings/{booking_id}"]["get"]
    not_found = operation["responses"]["404"]["content"]["application/json"]["schema"]
    assert not_found == {"$ref": "#/components/schemas/Error"}
    default = spec["components"]["responses"]["DEFAULT_ERROR"]
    assert default["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }


def test_interactive_docs_are_served_with_local_assets(client):
    page = client.get("/v1/api/docs")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "/v1/api/docs/assets/swagger-ui-bundle.js" in html
    assert "/v1/api/openapi.json" in html
    asset = client.get("/v1/api/docs/assets/swagger-ui-bundle.js")
    assert asset.status_code == 200 and len(asset.data) > 100_000


# --- every value described as tightly as the server enforces ----------------------------------

CONSTRAINTS = {
    "format",
    "pattern",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
}
# Values that need no constraint beyond their type, and why.
EXEMPT_TYPES = {"boolean": "a boolean has nothing to bound"}
# Properties exempt by path, and why (none today: add one only with its reason).
EXEMPT_PATHS: dict[str, str] = {}


def loose_values(where: str, schema: dict) -> list[str]:
    """Paths under ``schema`` whose value has no type, or a type with no format, pattern,
    enum or bounds (objects are checked property by property, arrays item by item and for
    their own bounds; ``anyOf``/``oneOf`` alternative by alternative)."""
    if "$ref" in schema or where in EXEMPT_PATHS:
        return []
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        return [p for i, a in enumerate(alternatives) for p in loose_values(f"{where}|{i}", a)]
    kind = schema.get("type")
    if kind == "object":
        found = [
            p
            for name, value in schema.get("properties", {}).items()
            for p in loose_values(f"{where}.{name}", value)
        ]
        extra = schema.get("additionalProperties")
        if extra == {}:
            found.append(f"{where}.* (anything)")
        elif isinstance(extra, dict):
            found += loose_values(f"{where}.*", extra)
        return found
    if kind in EXEMPT_TYPES:
        return []
    found = loose_values(f"{where}[]", schema.get("items", {})) if kind == "array" else []
    if kind is None or not CONSTRAINTS & schema.keys():
        found.append(where)
    return found


def test_every_schema_property_has_a_type_and_a_format_pattern_enum_or_bounds(spec):
    loose = [p for name, s in spec["components"]["schemas"].items() for p in loose_values(name, s)]
    assert loose == []


def test_every_parameter_has_a_type_and_a_format_pattern_enum_or_bounds(spec):
    loose = [
        path
        for route, operations in spec["paths"].items()
        for method, operation in operations.items()
        if method != "parameters"
        for parameter in [*operations.get("parameters", []), *operation.get("parameters", [])]
        for path in loose_values(f"{method} {route} {parameter['name']}", parameter["schema"])
    ]
    assert loose == []


def test_the_checker_finds_a_bare_string_an_untyped_value_and_an_open_dictionary():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "anything": {},
            "free": {"type": "object", "additionalProperties": {}},
            "bounded": {"type": "string", "maxLength": 5},
            "flag": {"type": "boolean"},
        },
    }
    assert loose_values("S", schema) == ["S.name", "S.anything", "S.free.* (anything)"]


def test_every_operation_has_an_operation_id(spec):
    ids = [
        op["operationId"]
        for ops in spec["paths"].values()
        for m, op in ops.items()
        if m != "parameters"
    ]
    assert sorted(ids) == sorted(
        [
            "checkAvailability",
            "listEventTypes",
            "listBookings",
            "getBooking",
            "cancelBooking",
            "createBooking",
            "updateBooking",
            "holdSlot",
            "releaseHold",
        ]
    )


def test_a_created_booking_links_to_get_update_and_cancel_it(spec):
    created = spec["paths"]["/v1/api/calendar/event-types/{event_type_id}/bookings"]["post"]
    links = created["responses"]["201"]["links"]
    assert {name: link["operationId"] for name, link in links.items()} == {
        "GetBooking": "getBooking",
        "UpdateBooking": "updateBooking",
        "CancelBooking": "cancelBooking",
    }
    assert all(link["parameters"]["booking_id"] == "$response.body#/id" for link in links.values())
    assert links["UpdateBooking"]["parameters"]["event_type_id"] == "$request.path.event_type_id"


def test_every_schema_and_operation_has_an_example(spec):
    assert [name for name, s in spec["components"]["schemas"].items() if "example" not in s] == []
    for route, operations in spec["paths"].items():
        for method, op in operations.items():
            if method == "parameters":
                continue
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            assert body is None or "example" in body, (method, route)
            success = next(op["responses"][s] for s in ("200", "201") if s in op["responses"])
            assert "example" in success["content"]["application/json"], (method, route)
            for status in ("401", "403", "404", "429"):
                if status in op["responses"]:
                    assert op["responses"][status]["content"]["application/json"]["examples"]


SERVER_READS = [
    "2031-01-06",
    "2031-01-06T14",
    "2031-01-06 14:00",
    "20310106",
    "20310106T140000Z",
    "2031-W02-1",
    "2031-01-06T14:00+05",
    "2031-01-06T14:00:00+05:00:30",
    "2031-01-06T14:00:00,5Z",
    " 2031-01-06 ",
    "2031-01-06T14:00:00.123456789Z",
    "2031-01-06T14:00:00.1234567+05:30",
]


@pytest.mark.parametrize("text", SERVER_READS)
def test_every_instant_form_the_server_reads_matches_the_documented_pattern(spec, text):
    read_instant(text)  # the server reads it
    documented = spec["components"]["schemas"]["CreateBooking"]["properties"]["startTime"]
    assert re.fullmatch(documented["pattern"], text)
    assert documented["minLength"] <= len(text) <= documented["maxLength"]


def test_an_instant_longer_than_documented_is_refused(spec):
    documented = spec["components"]["schemas"]["CreateBooking"]["properties"]["startTime"]
    with pytest.raises(InvalidInstant):
        read_instant("2031-01-06T14:00:00." + "1" * documented["maxLength"] + "Z")


def test_the_overview_says_what_the_api_is_its_errors_and_where_the_agents_guide_is(spec, app):
    description = spec["info"]["description"]
    public_url = settings_of(app).base_url.rstrip("/")
    assert "x-calendar-api-key" in description
    assert f"({public_url}/llms.txt)" in description
    assert codes_table() in description


def test_the_server_is_the_public_url(spec, app):
    assert spec["servers"] == [{"url": settings_of(app).base_url.rstrip("/")}]


def test_every_code_the_api_answers_with_has_its_status_and_cause():
    assert set(ERROR_CODES) == set(ErrorCode)


def test_the_documented_table_of_codes_is_the_documents_own():
    assert codes_table() in (ROOT / "docs" / "api.md").read_text()


SERVER_REFUSES = [
    "00000000",
    "0000-01-01",
    "1899-12-31",
    "2200-01-01",
    "2031-13-01",
    "2031-00-10",
    "2031-01-32",
    "2031-W54",
    "2031-W02-8",
    "2031-01-06T25:00",
    "2031-01-06T14:60",
]


@pytest.mark.parametrize("text", SERVER_REFUSES)
def test_an_instant_the_server_refuses_for_its_ranges_does_not_match_the_pattern(spec, text):
    with pytest.raises(InvalidInstant):
        read_instant(text)
    documented = spec["components"]["schemas"]["CreateBooking"]["properties"]["startTime"]
    assert not re.fullmatch(documented["pattern"], text)


def test_every_year_the_server_reads_matches_the_pattern(spec):
    documented = spec["components"]["schemas"]["CreateBooking"]["properties"]["startTime"]
    for year in range(MIN_YEAR, MAX_YEAR + 1):
        assert re.fullmatch(documented["pattern"], f"{year}-01-06"), year


def test_a_one_letter_timezone_does_not_match_the_pattern_but_the_shortest_names_do(spec):
    documented = spec["components"]["schemas"]["CreateBooking"]["properties"]["timezone"]
    assert not re.fullmatch(documented["pattern"], "A")
    for name in ("GB", "NZ", "UTC", "America/New_York", "Etc/GMT+5"):
        assert is_timezone(name) and re.fullmatch(documented["pattern"], name), name
