"""Schema-driven fuzzing with schemathesis: every operation of the OpenAPI document, against a
live gunicorn server, with generated valid and invalid input and a full-permission key.

Checks: no 5xx answers; every answer matches the documented schema, status codes and content
type. The number of examples is bounded (``FUZZ_EXAMPLES``, default 60 per operation) so the run
stays within a few minutes; raise it locally for a deeper search:
``FUZZ_EXAMPLES=1000 .venv/bin/pytest tests/api/test_fuzz.py``.
"""

from __future__ import annotations

import os
import random

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app import create_app
from tests.factories import make_booking, next_monday, ny
from tests.servers import gunicorn

pytestmark = pytest.mark.date_sensitive  # bookings from next Monday on

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]


@pytest.fixture
def live_tenant(tenant):
    """The tenant, with bookings the generated ids can hit."""
    monday = next_monday()
    bookings = [make_booking(tenant, ny(monday, hour)) for hour in (9, 11, 13)]
    return tenant, [b.id for b in bookings]


@pytest.fixture
def live_server(database_url, live_tenant):
    # Fuzzing sends far more requests than an agent may; lift the limits for this server.
    env = {"RATE_LIMIT": "1000000/minute", "RATE_LIMIT_UNAUTHENTICATED": "1000000/minute"}
    # gunicorn answers request lines over 4 KiB itself, with an HTML 414 that is not the app's
    # (a deployment's proxy sets that bound); let every generated URL reach the app.
    with gunicorn(database_url, env=env, options=("--limit-request-line", "0")) as base:
        yield base


def _operations() -> list:
    """The operations of the OpenAPI document (it needs no database to be built: the app's is
    never connected to, nothing listens on port 9)."""
    unused = "postgresql+psycopg://postgres@127.0.0.1:9/unused"
    app = create_app({"SQLALCHEMY_DATABASE_URI": unused, "SECRET_KEY": "x", "TESTING": True})
    document = app.test_client().get("/v1/api/openapi.json").json
    return [result.ok() for result in schemathesis.openapi.from_dict(document).get_all_operations()]


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("operation", _operations(), ids=lambda operation: operation.label)
def test_api_conforms_to_its_openapi_document(operation, mode, live_server, live_tenant):
    tenant, booking_ids = live_tenant

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def call(case):
        # Half the time aim at records that exist, so input reaches the deeper rules.
        chooser = random.Random(repr(case.body) + repr(case.query))
        path = case.path_parameters or {}
        if "event_type_id" in path and chooser.random() < 0.5:
            path["event_type_id"] = tenant.event_types["Cleaning"]
        if "booking_id" in path and chooser.random() < 0.5:
            path["booking_id"] = chooser.choice(booking_ids)
        case.call_and_validate(base_url=live_server, headers=tenant.headers(), checks=CHECKS)

    call()
