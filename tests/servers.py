"""Real server processes for tests that need real HTTP: gunicorn on a free loopback port, on
the test process's clock."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from socketserver import BaseServer
from typing import Self

import time_machine

from tests.database_templates import TEMPLATES

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MACHINE_REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def project_copy(tmp_path: Path) -> Path:
    """The project's files in a folder of their own, as a fresh clone has them (no
    ``instance/``), for ``make run`` there with this checkout's virtualenv (``VENV=…``): its
    embedded PostgreSQL keeps its data in the copy's ``instance/``."""
    copy = tmp_path / "project"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "instance", "tests", "bench", "docs", "test-artifacts", "__pycache__"
        ),
    )
    return copy


def embedded_server_running(project: Path) -> bool:
    """Whether the embedded PostgreSQL of ``project`` runs: PostgreSQL keeps postmaster.pid in
    its data folder while it runs and removes it when it stops."""
    return (project / "instance" / "postgres" / "postmaster.pid").exists()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# When the tests run on a shifted clock (conftest's --clock, time-machine in this process), a
# server travels by the same offset from the real clock before its program starts, so the two
# agree on "now"; forked workers inherit it. (libfaketime cannot do it: Debian's 0.9.10 breaks
# Python 3.11, whose time.sleep fails with EINVAL or whose timed waits never end, depending on
# FAKETIME_DONT_FAKE_MONOTONIC.)
ON_THE_SHIFTED_CLOCK = """\
import sys, time
import time_machine
time_machine.travel(time.time() + float(sys.argv.pop(1)), tick=True).start()
from {module} import {main}
sys.exit({main}())
"""


# Settings of a server that races many writes for one calendar: each create waits for the
# calendar's lock in turn, and on a machine busy with other tests the last ones wait longer than
# a web request may wait on PostgreSQL by default (2 s, app.deadlines), or than one statement
# may run, and answer 503 (retryable, but not what a race's test is about: how many win).
PATIENT = {
    "DB_STATEMENT_TIMEOUT_MS": "30000",
    "DB_CONNECT_TIMEOUT_S": "30",
    "DB_POOL_TIMEOUT_S": "30",
    "DB_REQUEST_WAIT_S": "30",
}


# How often a server thread of the tests looks for its shutdown: ``serve_forever``'s default,
# 0.5 s, made every stop of a test's server wait up to that long (20 tests of
# tests/services/test_push.py took 0.5 s each to tear down).
SHUTDOWN_POLL_S = 0.02


def serve_in_thread(server: BaseServer) -> threading.Thread:
    """Run ``server`` in a daemon thread; its ``shutdown()`` then returns within
    ``SHUTDOWN_POLL_S``."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
    )
    thread.start()
    return thread


@contextmanager
def serving_in_thread(handler: type) -> Iterator[str]:
    """An HTTP server of ``handler`` (a ``BaseHTTPRequestHandler``) on a free loopback port, in
    a thread of the test process, each request in a thread of its own; yields its base URL."""
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    server.daemon_threads = True
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def on_the_tests_clock(program: str, module: str, main: str) -> list[str]:
    """The command that starts ``program`` (a console script beside this Python, whose entry
    point is ``module``'s ``main``) on this process's clock."""
    if not time_machine.escape_hatch.is_travelling():
        return [str(BIN / program)]
    offset = time.time() - time_machine.escape_hatch.time.time()
    code = ON_THE_SHIFTED_CLOCK.format(module=module, main=main)
    return [sys.executable, "-c", code, repr(offset)]


def gunicorn_command() -> list[str]:
    """gunicorn, on this process's clock."""
    return on_the_tests_clock("gunicorn", "gunicorn.app.wsgiapp", "run")


def stop_process(process: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """End a server process if it still runs: TERM (after CONT, which a frozen one needs before
    it can act on TERM), then KILL if it has not ended within ``timeout`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGCONT)
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass(frozen=True)
class Demo:
    api_key: str
    event_types: dict[str, int]
    email: str
    password: str


def migrate_and_run_demo(env: dict[str, str]) -> Demo:
    """``flask db upgrade`` and ``flask demo`` as the README runs them, in ``env`` (the whole
    process environment), on the new database ``env["DATABASE_URL"]``; returns what the demo
    printed. This process runs the two commands once and copies their database after that
    (``tests.database_templates``): the copies share the demo's password and key. What the two
    write follows from the code alone: the demo workspace has no calendar connection, webhook
    or other secret that a setting (the secret key, a provider's address) would shape."""
    return TEMPLATES.fill(
        env["DATABASE_URL"],
        "demo",
        lambda url: _run_migrate_and_demo({**env, "DATABASE_URL": url}),
    )


def _run_migrate_and_demo(env: dict[str, str]) -> Demo:
    flask = [str(BIN / "flask"), "--app", "wsgi"]
    subprocess.run([*flask, "db", "upgrade"], cwd=ROOT, env=env, check=True, capture_output=True)
    demo = subprocess.run(
        [*flask, "demo"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout
    return Demo(
        api_key=re.search(r"API key \(shown once\): (\S+)", demo).group(1),
        event_types=json.loads(re.search(r"Event types: (\{.*\})", demo).group(1)),
        email=re.search(r"email: (\S+)", demo).group(1),
        password=re.search(r"password \(shown once\): (\S+)", demo).group(1),
    )


def migrate_and_demo(env: dict[str, str]) -> tuple[str, dict[str, int]]:
    """The demo's API key and event type ids by name (``migrate_and_run_demo``)."""
    demo = migrate_and_run_demo(env)
    return demo.api_key, demo.event_types


class OwnServer:
    """A server process of the test's own (``process``, once started), which the test may stop,
    freeze and thaw; ``with`` starts it and stops it at the end."""

    process: subprocess.Popen | None = None

    def start(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        stop_process(self.process)

    def freeze(self) -> None:
        """The server stops answering; the kernel still accepts connections and keeps those
        open (a hung server)."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)


def status_of(url: str, key: str, *, timeout: float = 30.0) -> int:
    """The status of a ``GET`` of ``url`` with the API key ``key``."""
    request = urllib.request.Request(url, headers={"x-calendar-api-key": key})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def post_all(urls_and_bodies, headers):
    """Send every request at the same moment (a barrier releases the threads together)."""
    barrier = threading.Barrier(len(urls_and_bodies))

    def send(item):
        url, payload = item
        request = urllib.request.Request(
            url,
            data=json.dumps(payload).encode(),
            method="POST",
            headers={**headers, "Content-Type": "application/json"},
        )
        barrier.wait()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    with ThreadPoolExecutor(max_workers=len(urls_and_bodies)) as pool:
        return list(pool.map(send, urls_and_bodies))


def wait_until_serving(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing serving at {url}")


@contextmanager
def gunicorn(
    database_url: str,
    *,
    workers: int = 2,
    env: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
    log_path: Path | None = None,
) -> Iterator[str]:
    """A gunicorn serving ``wsgi:app`` on ``database_url``; yields its base URL. Its stderr
    (the app's log) goes to ``log_path`` when given.

    Several worker processes need shared rate-limit counts, so the server counts in the
    machine's Redis under a key prefix of its own (pass ``REDIS_URL`` / ``RATELIMIT_KEY_PREFIX``
    in ``env`` to choose otherwise; ``"REDIS_URL": ""`` serves the embedded in-memory default).
    On a shifted test clock (``--clock``) the server keeps the tests' clock.
    """
    port = free_port()
    process_env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test-secret-key",
        "REDIS_URL": MACHINE_REDIS,
        "RATELIMIT_KEY_PREFIX": f"test-{uuid.uuid4().hex}",
        "OUTBOX_DISPATCH": "0",  # no worker consumes these servers' events
        # Where it listens, as the Procfile's web process is told: its links point there.
        "HOST": "127.0.0.1",
        "PORT": str(port),
        **(env or {}),
    }
    command = [
        *gunicorn_command(),
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--timeout",
        "60",
        # A test stops its server once it has read the last answer it needs; a graceful stop
        # would wait out each idle keep-alive connection (a browser keeps some) for up to 5 s.
        "--graceful-timeout",
        "1",
        *options,
        "wsgi:app",
    ]
    log = open(log_path, "w") if log_path else subprocess.DEVNULL  # noqa: SIM115
    server = subprocess.Popen(
        command, cwd=ROOT, env=process_env, stdout=subprocess.DEVNULL, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base + "/v1/api/openapi.json")
        yield base
    finally:
        stop_process(server, timeout=15)
        if log_path:
            log.close()
