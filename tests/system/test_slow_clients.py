"""Slow clients do not starve others: 200 connections that send their request head, or their
body, a byte at a time leave a normal request on the same server answered within a second of
its usual time (the production serving stack: gunicorn's gevent workers on PostgreSQL)."""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celery_workers import wait_for
from tests.servers import Demo, gunicorn, migrate_and_run_demo

SLOW_CONNECTIONS = 200
ALLOWED_DELAY_S = 1.0


@pytest.fixture(scope="module")
def served(postgres_database) -> Iterator[tuple[str, Demo]]:
    database_url = postgres_database()
    demo = migrate_and_run_demo({**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "slow"})
    with gunicorn(database_url, workers=2, env={"RATE_LIMIT": "100000/minute"}) as base:
        yield base, demo


def taken_by_the_server(port: int, count: int) -> bool:
    """Whether the server listening on ``port`` has accepted every connection made to it (its
    accept queue is empty) and read what was sent on at least ``count`` of them (their
    receive queues are empty), as the kernel shows it in ``/proc/net/tcp``."""
    listening, read = None, 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if int(local.rsplit(":", 1)[1], 16) != port:
                continue
            waiting = int(queues.split(":")[1], 16)
            if state == "0A":  # LISTEN: its receive queue is the accept backlog
                listening = waiting if listening is None else listening + waiting
            elif state == "01" and waiting == 0:  # ESTABLISHED, everything read
                read += 1
    return listening == 0 and read >= count


class Trickle:
    """``SLOW_CONNECTIONS`` connections, each sent ``opening`` and then one byte of ``drip``
    at a time, round after round, until stopped: none ever completes its request."""

    def __init__(self, base: str, opening: bytes, drip: bytes) -> None:
        self.address = base.removeprefix("http://").split(":")
        self.opening, self.drip = opening, drip
        self.stopping = threading.Event()
        self.sockets: list[socket.socket] = []

    def __enter__(self) -> Trickle:
        host, port = self.address[0], int(self.address[1])
        for _ in range(SLOW_CONNECTIONS):
            connection = socket.create_connection((host, port), timeout=5)
            connection.sendall(self.opening)
            self.sockets.append(connection)
        self.thread = threading.Thread(target=self.drip_bytes)
        self.thread.start()
        assert wait_for(lambda: taken_by_the_server(port, SLOW_CONNECTIONS), timeout=30)
        return self

    def drip_bytes(self) -> None:
        position = 0
        while not self.stopping.is_set():
            byte = self.drip[position % len(self.drip) : position % len(self.drip) + 1]
            for connection in self.sockets:
                with contextlib.suppress(OSError):
                    connection.send(byte)
            position += 1
            self.stopping.wait(0.2)

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        self.thread.join()
        for connection in self.sockets:
            connection.close()


def normal_request_seconds(base: str, demo: Demo, count: int) -> list[float]:
    """The time of ``count`` list requests, one after another, each on a new connection."""
    request = urllib.request.Request(
        base + "/v1/api/calendar/bookings?limit=5", headers={"x-calendar-api-key": demo.api_key}
    )
    times = []
    for _ in range(count):
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200
            response.read()
        times.append(time.monotonic() - started)
    return times


def still_waiting(connection: socket.socket) -> bool:
    """The server has neither answered nor closed the connection."""
    connection.setblocking(False)
    try:
        connection.recv(1)  # an answer, or b"" for a closed connection
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def assert_not_delayed(base: str, demo: Demo, trickle: Trickle) -> None:
    usual = statistics.median(normal_request_seconds(base, demo, 10))
    with trickle:
        during = normal_request_seconds(base, demo, 20)
        held = sum(1 for connection in trickle.sockets if still_waiting(connection))
    assert held == SLOW_CONNECTIONS  # the slow clients were served patiently, not dropped
    assert max(during) <= usual + ALLOWED_DELAY_S, (usual, sorted(during)[-3:])


@pytest.mark.slow
def test_two_hundred_clients_sending_their_headers_a_byte_at_a_time_do_not_delay_others(served):
    base, demo = served
    opening = b"GET /v1/api/calendar/bookings HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    assert_not_delayed(base, demo, Trickle(base, opening, drip=b"X-Slow: " + b"a" * 4000))


@pytest.mark.slow
def test_two_hundred_clients_sending_their_body_a_byte_at_a_time_do_not_delay_others(served):
    base, demo = served
    event_type = demo.event_types["Consultation"]
    opening = (
        f"POST /v1/api/calendar/event-types/{event_type}/bookings HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nx-calendar-api-key: {demo.api_key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    ).encode()
    assert_not_delayed(base, demo, Trickle(base, opening, drip=b'{"title": "' + b"a" * 4000))
