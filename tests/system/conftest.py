"""Fixtures of the system tests: real server processes over loopback."""

from __future__ import annotations

import pytest

from tests.servers import PATIENT, gunicorn


@pytest.fixture
def servers(database_url):
    """Two gunicorn masters, each with two (gevent) worker processes, on the test's database:
    races across processes."""
    with (
        gunicorn(database_url, env=PATIENT) as first,
        gunicorn(database_url, env=PATIENT) as second,
    ):
        yield [first, second]
