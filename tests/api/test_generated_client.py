"""A client generated from the OpenAPI document alone (openapi-python-client, from PyPI) runs the
demo flow against a live server: availability, create, get, reschedule, cancel. If the document
and the server disagree (a name, a type, a required field, a status), the generated code cannot
build the request or parse the answer, and this fails."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

from tests.factories import next_monday
from tests.live_api import LiveApi

pytestmark = pytest.mark.slow  # a gunicorn of its own

PACKAGE = "generated_calendar_client"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture(scope="module")
def generated(live: LiveApi, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The client package generated from the live server's own document."""
    folder = tmp_path_factory.mktemp("client")
    with urllib.request.urlopen(f"{live.base_url}/openapi.json", timeout=10) as answer:
        (folder / "openapi.json").write_bytes(answer.read())
    (folder / "config.yaml").write_text(f"post_hooks: []\npackage_name_override: {PACKAGE}\n")
    result = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(folder / "openapi.json"),
            "--config",
            str(folder / "config.yaml"),
            "--meta",
            "none",
            "--output-path",
            str(folder / PACKAGE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout, result.stdout
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def module(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.{name}")


@pytest.mark.date_sensitive
def test_a_generated_client_runs_the_demo_flow(live: LiveApi, generated: ModuleType) -> None:
    tenant = live.tenant()
    event_type_id = tenant.event_types["Cleaning"]
    client = generated.AuthenticatedClient(
        base_url=live.base_url.removesuffix("/v1/api"),
        token=tenant.keys["all"],
        prefix="",
        auth_header_name="x-calendar-api-key",
        raise_on_unexpected_status=True,
    )
    models = module("models")
    day = next_monday()

    # Availability: the generated model parses every day and slot.
    days = module("api.availability.check_availability").sync(
        client=client,
        start_date=day.isoformat(),
        end_date=day.isoformat(),
        event_type_id=event_type_id,
    )
    assert isinstance(days, list) and len(days) == 1, days
    first, second = days[0].slots[0], days[0].slots[1]

    # Create on the first open slot.
    created = module("api.event_type_bookings.create_booking").sync_detailed(
        event_type_id=event_type_id,
        client=client,
        body=models.CreateBooking(
            start_time=first.start.isoformat().replace("+00:00", "Z"),
            end_time=first.end.isoformat().replace("+00:00", "Z"),
            attendees=[models.AttendeeInput(email="generated@example.com", name="Gen Client")],
            idempotency_key="generated-client-demo",
        ),
    )
    assert created.status_code == 201, created.content
    booking = created.parsed
    assert (
        isinstance(booking, models.Booking)
        and booking.attendees[0].email == "generated@example.com"
    )

    # Read it back.
    fetched = module("api.bookings.get_booking").sync(booking_id=booking.id, client=client)
    assert isinstance(fetched, models.Booking)
    assert (fetched.uid, fetched.start_time) == (booking.uid, first.start)

    # Reschedule it to the second slot.
    moved = module("api.event_type_bookings.update_booking").sync(
        event_type_id=event_type_id,
        booking_id=booking.id,
        client=client,
        body=models.UpdateBooking(
            start_time=second.start.isoformat().replace("+00:00", "Z"),
            end_time=second.end.isoformat().replace("+00:00", "Z"),
        ),
    )
    assert isinstance(moved, models.BookingUpdateResult), moved
    assert (moved.start_time, moved.end_time - moved.start_time) == (
        second.start,
        timedelta(minutes=30),
    )

    # Cancel it.
    cancelled = module("api.bookings.cancel_booking").sync(
        booking_id=booking.id, client=client, body=models.CancelBooking(reason="Generated client")
    )
    assert isinstance(cancelled, models.Cancellation), cancelled
    assert cancelled.status == models.CancellationStatus.CANCELLED
    assert cancelled.cancellation_reason == "Generated client"


def test_a_generated_client_reads_an_error_as_the_documented_envelope(
    live: LiveApi, generated: ModuleType
) -> None:
    client = generated.AuthenticatedClient(
        base_url=live.base_url.removesuffix("/v1/api"),
        token="cbk_not-a-key",
        prefix="",
        auth_header_name="x-calendar-api-key",
    )
    answer = module("api.bookings.get_booking").sync_detailed(booking_id=1, client=client)
    assert answer.status_code == 401
    error = answer.parsed
    assert isinstance(error, module("models").Error)
    assert (error.message, str(error.code)) == ("Invalid or inactive API key", "invalid_api_key")
    assert json.loads(answer.content)["statusCode"] == 401
