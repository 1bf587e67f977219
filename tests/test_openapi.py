"""The OpenAPI document and the interactive docs."""

from __future__ import annotations

import pytest

# (path, method, the error statuses it documents besides 401/403 and the default)
OPERATIONS = [
    ("/v1/api/calendar/availability", "get", ["400", "404"]),
    ("/v1/api/calendar/bookings", "get", ["400"]),
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
