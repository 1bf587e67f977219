"""The OpenAPI document's examples are true: sent to a live server holding the demo workspace
(what ``flask demo`` provisions on a fresh database), the documented requests succeed, and the
documented answers and errors are what comes back, word for word (ids, tokens and timestamps
aside)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from app.extensions import db
from app.services.accounts.demo import ensure_demo
from tests.live_api import LiveApi, live_api

pytestmark = pytest.mark.slow  # a gunicorn of its own

BOOKINGS = "/calendar/event-types/{event_type_id}/bookings"
VOLATILE = {
    "id",
    "uid",
    "createdAt",
    "updatedAt",
    "cancelledAt",
    "releasedAt",
    "expiresAt",
    "holdToken",
    "manageUrl",  # signed with the deployment's key, under its PUBLIC_URL
}


@pytest.fixture(scope="module")
def demo(migrated_postgres_database: Callable[[], str]) -> Iterator[tuple[LiveApi, str, dict]]:
    """A live server on a fresh database with the demo workspace; its key; its document."""
    with live_api(migrated_postgres_database()) as server:
        with server.app.app_context():
            access = ensure_demo()
            db.session.commit()
        document = requests.get(f"{server.base_url}/openapi.json", timeout=10).json()
        yield server, access.api_key, document


def operation(document: dict, path: str, method: str) -> dict:
    return document["paths"][f"/v1/api{path}"][method]


def request_example(op: dict) -> Any:
    return op["requestBody"]["content"]["application/json"]["example"]


def answer_example(op: dict, status: str) -> Any:
    return op["responses"][status]["content"]["application/json"]["example"]


def error_example(op: dict, status: str, name: str) -> dict:
    return op["responses"][status]["content"]["application/json"]["examples"][name]["value"]


def steady(value: Any) -> Any:
    """``value`` without what differs between two equal answers (ids, tokens, timestamps)."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def call(server: LiveApi, key: str, method: str, path: str, **kwargs: Any) -> requests.Response:
    headers = {"x-calendar-api-key": key}
    return requests.request(method, server.base_url + path, headers=headers, timeout=10, **kwargs)


def test_the_documented_flow_succeeds_against_the_demo_workspace_as_documented(demo):
    server, key, document = demo
    availability = operation(document, "/calendar/availability", "get")
    query = {
        p["name"]: p["schema"]["example"]
        for p in availability["parameters"]
        if "example" in p["schema"] and p["in"] == "query"
    }
    assert set(query) == {"startDate", "endDate", "eventTypeId"}
    answer = call(server, key, "GET", "/calendar/availability", params=query)
    assert answer.status_code == 200, answer.text
    assert answer.json() == answer_example(availability, "200")

    listing = operation(document, "/calendar/event-types", "get")
    offered = call(server, key, "GET", "/calendar/event-types")
    assert offered.status_code == 200, offered.text
    assert steady(offered.json()) == steady(answer_example(listing, "200"))

    event_type_id = query["eventTypeId"]
    create = operation(document, "/calendar/event-types/{event_type_id}/bookings", "post")
    created = call(
        server,
        key,
        "POST",
        BOOKINGS.format(event_type_id=event_type_id),
        json=request_example(create),
    )
    assert created.status_code == 201, created.text
    assert steady(created.json()) == steady(answer_example(create, "201"))
    booking_id = created.json()["id"]

    get = operation(document, "/calendar/bookings/{booking_id}", "get")
    fetched = call(server, key, "GET", f"/calendar/bookings/{booking_id}")
    assert steady(fetched.json()) == steady(answer_example(get, "200"))

    listed = call(server, key, "GET", "/calendar/bookings")
    list_op = operation(document, "/calendar/bookings", "get")
    assert steady(listed.json()) == steady(answer_example(list_op, "200"))

    update = operation(
        document, "/calendar/event-types/{event_type_id}/bookings/{booking_id}", "put"
    )
    moved = call(
        server,
        key,
        "PUT",
        f"{BOOKINGS.format(event_type_id=event_type_id)}/{booking_id}",
        json=request_example(update),
    )
    assert moved.status_code == 200, moved.text
    assert steady(moved.json()) == steady(answer_example(update, "200"))

    cancel = operation(document, "/calendar/bookings/{booking_id}", "delete")
    cancelled = call(
        server, key, "DELETE", f"/calendar/bookings/{booking_id}", json=request_example(cancel)
    )
    assert cancelled.status_code == 200, cancelled.text
    assert steady(cancelled.json()) == steady(answer_example(cancel, "200"))

    hold = operation(document, "/calendar/event-types/{event_type_id}/holds", "post")
    held = call(
        server,
        key,
        "POST",
        f"/calendar/event-types/{event_type_id}/holds",
        json=request_example(hold),
    )
    assert held.status_code == 201, held.text
    assert steady(held.json()) == steady(answer_example(hold, "201"))
    release = operation(document, "/calendar/event-types/{event_type_id}/holds/{hold_id}", "delete")
    released = call(
        server, key, "DELETE", f"/calendar/event-types/{event_type_id}/holds/{held.json()['id']}"
    )
    assert steady(released.json()) == steady(answer_example(release, "200"))


def test_the_documented_errors_are_the_answers_word_for_word(demo):
    server, key, document = demo
    create = operation(document, "/calendar/event-types/{event_type_id}/bookings", "post")
    path = BOOKINGS.format(event_type_id=1)
    body = {**request_example(create), "idempotencyKey": "examples-first"}
    first = call(server, key, "POST", path, json=body)
    assert first.status_code == 201, first.text

    taken = call(server, key, "POST", path, json={**body, "idempotencyKey": "examples-second"})
    assert taken.json() == error_example(create, "400", "slotTaken")

    unparsable = call(server, key, "POST", path, json={**body, "startTime": "next tuesday"})
    assert unparsable.json() == error_example(create, "400", "invalidField")

    unknown_key = call(server, "cbk_not-a-key", "POST", path, json=body)
    assert unknown_key.json() == error_example(create, "401", "invalidKey")

    missing = call(server, key, "GET", "/calendar/bookings/999999")
    get = operation(document, "/calendar/bookings/{booking_id}", "get")
    assert missing.json() == error_example(get, "404", "notFound")

    list_op = operation(document, "/calendar/bookings", "get")
    bad_query = call(server, key, "GET", "/calendar/bookings", params={"startDate": "soon"})
    assert bad_query.json() == error_example(list_op, "400", "invalidParameter")


def test_the_documented_permission_error_is_the_answer(demo):
    server, _, document = demo
    tenant = server.tenant()
    list_op = operation(document, "/calendar/bookings", "get")
    refused = call(server, tenant.keys["without-canGetBookings"], "GET", "/calendar/bookings")
    assert refused.status_code == 403
    assert refused.json() == error_example(list_op, "403", "missingPermission")


def test_the_documented_second_cancel_is_the_answer(demo):
    server, key, document = demo
    create = operation(document, "/calendar/event-types/{event_type_id}/bookings", "post")
    availability = operation(document, "/calendar/availability", "get")
    last = answer_example(availability, "200")[0]["slots"][-1]  # a slot no other test takes
    body = {**request_example(create), "startTime": last["start"], "endTime": last["end"]}
    body.pop("idempotencyKey")
    booking = call(server, key, "POST", BOOKINGS.format(event_type_id=1), json=body)
    assert booking.status_code == 201, booking.text
    path = f"/calendar/bookings/{booking.json()['id']}"
    assert call(server, key, "DELETE", path).status_code == 200
    again = call(server, key, "DELETE", path)
    cancel = operation(document, "/calendar/bookings/{booking_id}", "delete")
    assert again.json() == error_example(cancel, "400", "notActive")
