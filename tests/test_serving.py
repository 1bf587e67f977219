"""The README's run path through real processes: migrate, demo, gunicorn, curl-like GET."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


@pytest.mark.slow
def test_fresh_sqlite_database_migrate_demo_and_serve(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'calendar.sqlite3'}",
        "SECRET_KEY": "serving-test",
    }
    flask = [str(BIN / "flask"), "--app", "wsgi"]
    subprocess.run([*flask, "db", "upgrade"], cwd=ROOT, env=env, check=True, capture_output=True)
    demo = subprocess.run(
        [*flask, "demo"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    key = re.search(r"API key \(shown once\): (\S+)", demo.stdout).group(1)

    port = free_port()
    server = subprocess.Popen(
        [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "2", "wsgi:app"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/v1/api"
        wait_for(base + "/openapi.json")
        request = urllib.request.Request(
            base + "/calendar/bookings", headers={"x-calendar-api-key": key}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json"
            assert response.read() == b'{"bookings":[],"total":0,"limit":50,"offset":0}\n'
    finally:
        server.terminate()
        server.wait(timeout=10)
