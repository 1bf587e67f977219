"""Stateful fuzzing with schemathesis: scenarios that chain operations through the document's
OpenAPI links (create → get, reschedule, cancel by the id the create returned), against a live
gunicorn, with the same checks as ``tests/api/test_fuzz.py`` (no 5xx, every answer as documented).

Random instants almost never fall inside working hours, so the write paths' success side would
go untested. The test narrows its copy of the document with generation hints: the event type
path parameter is the calendar's "Checkup", ``startTime`` is one of the calendar's open slots
(read from the availability API), the zone one of three real ones, and ``endTime`` follows
``startTime`` by the event type's hour. Everything else is generated as the document says.
The run reports what it did at the end of the test run's output (and in
``test-artifacts/fuzz-stateful.json``) and fails unless creates, reschedules and cancels
succeeded.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import text

from app.extensions import db
from tests.factories import next_monday
from tests.live_api import LiveApi, live_api

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # bookings from next Monday on
    pytest.mark.one_shifted_clock,  # long random runs; the dates only pick the slots
]

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "test-artifacts" / "fuzz-stateful.json"
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]
SCENARIOS, STEPS = 80, 8
ZONES = ["America/New_York", "Europe/Berlin", "UTC"]
# At least this many of each succeeded (with SCENARIOS × STEPS calls the counts run far higher;
# the floor only says the write paths' success side was reached at all).
AT_LEAST = {"createBooking 201": 10, "updateBooking 200": 1, "cancelBooking 200": 1}


def open_starts(live: LiveApi, tenant: Any, event_type_id: int) -> list[str]:
    """The calendar's open slot starts over the next three weeks, from the API itself."""
    first = next_monday()
    answer = requests.get(
        f"{live.base_url}/calendar/availability",
        params={
            "startDate": first.isoformat(),
            "endDate": (first + timedelta(days=20)).isoformat(),
            "eventTypeId": event_type_id,
        },
        headers=tenant.headers(),
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return [slot["start"] for day in answer.json() for slot in day["slots"]]


def narrowed(document: dict[str, Any], event_type_id: int, starts: list[str]) -> dict[str, Any]:
    """The document with the generation hints (see the module's note); answers untouched."""
    hinted = copy.deepcopy(document)
    for operations in hinted["paths"].values():
        for key, operation in operations.items():
            parameters = operation if key == "parameters" else operation.get("parameters", [])
            for parameter in parameters:
                if parameter["name"] == "event_type_id":
                    parameter["schema"] = {"type": "integer", "enum": [event_type_id]}
    for name in ("CreateBooking", "UpdateBooking", "CreateHold"):
        properties = hinted["components"]["schemas"][name]["properties"]
        properties["startTime"] = {"type": "string", "enum": starts}
        properties["timezone"] = {"type": "string", "enum": ZONES}
    # "Checkup" asks no questions: the only answers it takes are none.
    hinted["components"]["schemas"]["CreateBooking"]["properties"]["responses"] = {
        "type": "object",
        "maxProperties": 0,
    }
    attendee = hinted["components"]["schemas"]["AttendeeInput"]["properties"]
    attendee["timezone"] = {"type": "string", "enum": ZONES, "nullable": True}
    # The listing of event types links to nothing and changes nothing: its steps would be
    # steps not spent on the writes (``tests/api/test_fuzz.py`` fuzzes it).
    del hinted["paths"]["/v1/api/calendar/event-types"]
    return hinted


@pytest.fixture(scope="module")
def live(migrated_postgres_database: Callable[[], str]) -> Iterator[LiveApi]:
    """The API on gunicorn with the rate limits lifted (a scenario sends far more than an agent
    may) and a database of its own."""
    unlimited = "1000000/minute"
    with live_api(
        migrated_postgres_database(), RATE_LIMIT=unlimited, RATE_LIMIT_UNAUTHENTICATED=unlimited
    ) as server:
        yield server


def forget_bookings(live: LiveApi, sub_account_id: int) -> None:
    """Every scenario starts from the same calendar: hypothesis draws a scenario's steps from
    what the earlier steps answered, and the same draws must meet the same answers."""
    with live.app.app_context():
        for table in ("bookings", "slot_holds"):
            db.session.execute(
                text(f"DELETE FROM {table} WHERE sub_account_id = :id"), {"id": sub_account_id}
            )
        db.session.commit()


def test_stateful_scenarios_create_reschedule_and_cancel_bookings(live: LiveApi, record_property):
    tenant = live.tenant()
    event_type_id = tenant.event_types["Checkup"]
    starts = open_starts(live, tenant, event_type_id)
    assert len(starts) > 50, starts
    open_set = set(starts)
    document = requests.get(f"{live.base_url}/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(narrowed(document, event_type_id, starts))
    base_url = live.base_url.removesuffix("/v1/api")
    outcomes: Counter[str] = Counter()

    class Scenarios(schema.as_state_machine()):
        def setup(self) -> None:
            forget_bookings(live, tenant.sub_account_id)

        def before_call(self, case: Any) -> None:
            body = case.body if isinstance(case.body, dict) else None
            if body is None:
                return
            if body.get("startTime") in open_set:
                start = datetime.fromisoformat(body["startTime"].replace("Z", "+00:00"))
                body["endTime"] = (start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            elif "startTime" not in body:
                body.pop("endTime", None)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": base_url, "headers": tenant.headers()}

        def after_call(self, response: Any, case: Any) -> None:
            outcomes[
                f"{case.operation.definition.raw.get('operationId')} {response.status_code}"
            ] += 1

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

    Scenarios.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            database=None,
            # No replaying or shrinking: the server keeps what each scenario did (the slots it
            # took), so a replay could not draw the same steps, which hypothesis reports as a
            # flaky strategy instead of the failure. A failure is reported as it happened.
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
    )
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps(dict(sorted(outcomes.items())), indent=2) + "\n")
    # Shown in the run's summary by conftest's pytest_terminal_summary.
    record_property("outcomes", dict(sorted(outcomes.items())))
    short = {what: outcomes[what] for what in AT_LEAST}
    assert all(short[what] >= least for what, least in AT_LEAST.items()), dict(outcomes)
