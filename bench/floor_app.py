"""The floors ``bench.hot_path`` holds the API against: a bare Flask app, served exactly as the
API is (``gunicorn -c gunicorn.conf.py bench.floor_app:app``: the Procfile's configuration, so
gevent workers on PostgreSQL, as many, with the same keep-alive and JSON access log).

* ``GET /floor/json`` (floor A): a small JSON answer, no database.
* ``GET /floor/select/<id>`` (floor B): one primary-key ``SELECT`` of a row of ``bookings``
  (all its columns, as JSON).
* ``POST /floor/insert`` (floor C): one single-row ``INSERT`` in a transaction of its own
  (``BEGIN``, ``INSERT … RETURNING id``, ``COMMIT``) into a scratch table, ``TABLE``, which
  ``bench.hot_path`` creates (``CREATE_TABLE``); the row takes the JSON body's
  ``idempotencyKey``, ``startTime``, ``endTime`` and first attendee's email. 201 with the id.

No authentication, no rate limit, no ORM: what is left is Flask, gunicorn and psycopg. Each
worker process keeps up to ``POOL_SIZE`` connections (the API's pool size,
``app.database.DEFAULT_POOL_SIZE``, or ``DB_POOL_SIZE``), opened when first needed, in
autocommit mode so a read is one round trip; psycopg waits cooperatively under gevent's
monkey-patching, as in the API. ``DATABASE_URL`` is the API's (SQLAlchemy's
``postgresql+psycopg://`` form is accepted). Connections are named ``APPLICATION_NAME``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from flask import Flask, abort, request
from psycopg.rows import dict_row

TABLE = "bench_floor_writes"
CREATE_TABLE = f"""
CREATE TABLE {TABLE} (
    id bigserial PRIMARY KEY,
    idempotency_key text NOT NULL,
    start_at timestamptz NOT NULL,
    end_at timestamptz NOT NULL,
    email text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)
"""
APPLICATION_NAME = "bench-floor"
POOL_SIZE = int(os.environ.get("DB_POOL_SIZE") or 10)  # app.database.DEFAULT_POOL_SIZE


def conninfo(url: str) -> str:
    """A libpq URL from SQLAlchemy's ``postgresql+psycopg://`` form (or one already plain)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


class Pool:
    """Up to ``size`` connections of this process, reused last-in first-out. Under gevent the
    semaphore is gevent's (monkey-patched), and a greenlet only switches while waiting on I/O,
    so the list needs no lock of its own."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.idle: list[psycopg.Connection[dict[str, Any]]] = []
        self.slots = threading.BoundedSemaphore(size)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        with self.slots:
            if self.idle:
                conn = self.idle.pop()
            else:
                conn = psycopg.connect(
                    conninfo(self.url),
                    autocommit=True,
                    row_factory=dict_row,
                    application_name=APPLICATION_NAME,
                )
            try:
                yield conn
            except BaseException:
                conn.close()
                raise
            self.idle.append(conn)


app = Flask(__name__)
pool = Pool(os.environ.get("DATABASE_URL", ""), POOL_SIZE)


@app.get("/floor/json")
def floor_a() -> dict[str, Any]:
    return {"status": "ok", "floor": "A"}


@app.get("/floor/select/<int:row_id>")
def floor_b(row_id: int) -> dict[str, Any]:
    with pool.connection() as conn:
        row = conn.execute("SELECT * FROM bookings WHERE id = %s", (row_id,)).fetchone()
    if row is None:
        abort(404)
    return row


@app.post("/floor/insert")
def floor_c() -> tuple[dict[str, Any], int]:
    body = request.get_json()
    values = (
        body["idempotencyKey"],
        body["startTime"],
        body["endTime"],
        body["attendees"][0]["email"],
    )
    with pool.connection() as conn, conn.transaction():
        row = conn.execute(
            f"INSERT INTO {TABLE} (idempotency_key, start_at, end_at, email)"
            " VALUES (%s, %s, %s, %s) RETURNING id",
            values,
        ).fetchone()
    assert row is not None
    return {"id": row["id"]}, 201
