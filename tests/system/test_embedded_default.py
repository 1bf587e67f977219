"""The embedded default (no environment set) keeps the spec's promises through real processes:
``make run`` serves on its embedded PostgreSQL, stops it with one Ctrl-C and keeps its data for
the next start, and a key gets 60 requests a minute however the server is started, because
in-memory counts are kept by one process per database."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.celery_workers import wait_for
from tests.servers import (
    BIN,
    ROOT,
    embedded_server_running,
    free_port,
    gunicorn,
    migrate_and_demo,
    project_copy,
    status_of,
    wait_until_serving,
)

BOOKINGS = "/v1/api/calendar/bookings"

pytestmark = pytest.mark.slow


def embedded_env(**extra: str) -> dict[str, str]:
    """The process environment with none of the service's own settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDIS_URL", "DATABASE_URL", "SECRET_KEY", "RATE_LIMIT", "APP_ENV")
    }
    return {**env, **extra}


def statuses(url: str, key: str, count: int) -> Counter:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return Counter(pool.map(lambda _: status_of(url, key), range(count)))


def make_run(
    env: dict[str, str], log_path: Path, project: Path = ROOT
) -> tuple[subprocess.Popen, str, str]:
    """``make run`` as the README has it, in ``project``, until web, worker and beat are all up;
    returns the process, the web's base URL and the demo key."""
    port = free_port()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            ["make", "run", f"PORT={port}", f"VENV={ROOT / '.venv'}"],
            cwd=project,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    started = ("API key (shown once)", "celery@", " ready.", "beat: Starting")
    while not all(mark in log_path.read_text() for mark in started):
        assert process.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.2)
    key = re.search(r"API key \(shown once\): (\S+)", log_path.read_text()).group(1)
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(base + "/v1/api/openapi.json")
    return process, base, key


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: make and gunicorn alike
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def api(base: str, key: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"x-calendar-api-key": key, "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def book_the_first_open_slot(base: str, key: str) -> dict:
    """The README's steps 1 and 2: the first open slot of the demo's first event type, booked."""
    start = time.strftime("%Y-%m-%d", time.gmtime())
    end = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 14 * 86400))
    days = api(
        base, key, f"/v1/api/calendar/availability?eventTypeId=1&startDate={start}&endDate={end}"
    )
    slot = next(day["slots"][0] for day in days if day["slots"])
    attendee = {"email": "pat@example.com", "name": "Pat Lee"}
    return api(
        base,
        key,
        "/v1/api/calendar/event-types/1/bookings",
        {"startTime": slot["start"], "endTime": slot["end"], "attendees": [attendee]},
    )


def wait_until_embedded_server_stopped(project: Path, log: Path) -> None:
    assert wait_for(lambda: not embedded_server_running(project), timeout=30), log.read_text()


@pytest.mark.date_sensitive  # books the first open slot from today on
def test_make_run_serves_on_embedded_postgresql_and_keeps_its_data_across_a_restart(tmp_path):
    """From a fresh copy with no environment: web, worker and beat start with one command on
    the embedded PostgreSQL, a key gets 60 requests a minute, one Ctrl-C stops the programs and
    the server, and the second start finds the first one's booking."""
    project = project_copy(tmp_path)
    env = embedded_env()
    process, base, key = make_run(env, tmp_path / "make-run-0.log", project)
    try:
        assert embedded_server_running(project)
        booking = book_the_first_open_slot(base, key)  # two requests of the key's 60
        assert statuses(base + BOOKINGS, key, 70) == {200: 58, 429: 12}
    finally:
        stop(process)
    wait_until_embedded_server_stopped(project, tmp_path / "make-run-0.log")

    process, base, key = make_run(env, tmp_path / "make-run-1.log", project)
    try:
        kept = api(base, key, f"{BOOKINGS}/{booking['id']}")
        assert (kept["uid"], kept["startTime"]) == (booking["uid"], booking["startTime"])
    finally:
        stop(process)
    wait_until_embedded_server_stopped(project, tmp_path / "make-run-1.log")


def test_several_workers_without_redis_refuse_to_start(postgres_database):
    env = embedded_env(DATABASE_URL=postgres_database())
    result = subprocess.run(
        [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{free_port()}", "--workers", "3", "wsgi:app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "3 workers need REDIS_URL" in result.stderr


@pytest.fixture
def demo_database(postgres_database) -> tuple[str, str]:
    """A migrated database of its own with the demo workspace; returns its URL and a key."""
    url = postgres_database()
    key, _ = migrate_and_demo(embedded_env(DATABASE_URL=url, SECRET_KEY="embedded-test"))
    return url, key


def refusal(base: str, key: str) -> tuple[int, str]:
    request = urllib.request.Request(base + BOOKINGS, headers={"x-calendar-api-key": key})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    return refused.value.code, refused.value.read().decode()


def test_a_second_server_without_redis_refuses_agent_requests_while_the_first_serves(
    demo_database,
):
    url, key = demo_database
    single = {"REDIS_URL": ""}
    first_server = gunicorn(url, workers=1, env=single)
    first = first_server.__enter__()
    try:
        assert status_of(first + BOOKINGS, key) == 200
        with gunicorn(url, workers=1, env=single) as second:
            status, body = refusal(second, key)
            assert status == 503
            assert '"statusCode":503' in body and "set REDIS_URL" in body
            assert status_of(first + BOOKINGS, key) == 200

            first_server.__exit__(None, None, None)
            first_server = None
            assert status_of(second + BOOKINGS, key) == 200  # the claim ended with its process
    finally:
        if first_server is not None:
            first_server.__exit__(None, None, None)
