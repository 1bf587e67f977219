"""The README's run path through real processes: migrate, demo, gunicorn, curl-like GET."""

from __future__ import annotations

import os
import re
import subprocess
import urllib.request

import pytest

from tests.servers import BIN, ROOT, gunicorn


@pytest.mark.slow
def test_fresh_sqlite_database_migrate_demo_and_serve(tmp_path):
    database_url = f"sqlite:///{tmp_path / 'calendar.sqlite3'}"
    env = {**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "serving-test"}
    flask = [str(BIN / "flask"), "--app", "wsgi"]
    subprocess.run([*flask, "db", "upgrade"], cwd=ROOT, env=env, check=True, capture_output=True)
    demo = subprocess.run(
        [*flask, "demo"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    key = re.search(r"API key \(shown once\): (\S+)", demo.stdout).group(1)

    with gunicorn(database_url) as base:
        request = urllib.request.Request(
            base + "/v1/api/calendar/bookings", headers={"x-calendar-api-key": key}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json"
            assert response.read() == b'{"bookings":[],"total":0,"limit":50,"offset":0}\n'
