"""Throw-away databases made once and copied after that.

A database at the migrations' head takes about 3 s to make in-process, and one holding the
demo workspace as the README makes it (``flask db upgrade`` and ``flask demo``, each a process
starting the app) about 12 s; PostgreSQL copies either in about 0.3 s (``CREATE DATABASE …
TEMPLATE``). So each test process makes each kind once, the first time a test asks for it, on a
database of its own (the template, which nothing connects to afterwards), and every later
request gets a copy: the same tables, rows and sequences, as if it had been made the same way.

Every throw-away database of the run is made by ``create_database``, which also sets the
run's one database setting (``synchronous_commit``; a setting of a database is not copied with
it).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import psycopg
from sqlalchemy.engine import make_url

Made = TypeVar("Made")


def create_database(admin_url: str, name: str, template: str | None = None) -> None:
    """Creates database ``name`` on the server of ``admin_url`` (a copy of ``template`` when
    given). Its commits do not wait for the disk (``synchronous_commit = off``): what the tests
    check is what a commit makes visible, never whether it survives a crash, and on a busy CI
    disk a commit's flush took over the web request's 2 s budget for waiting on PostgreSQL,
    answering a create 503 that then committed."""
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')


def _server(url: str) -> tuple[Any, ...]:
    parsed = make_url(url)
    return (parsed.host, parsed.port)


def _is_empty(url: str) -> bool:
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public'"
        ).fetchone()
    return row is not None and row[0] == 0


class Templates:
    """The templates this process made, by what made them (``key``), on the run's server."""

    def __init__(self) -> None:
        self._admin_url: str | None = None
        self._made: dict[Hashable, tuple[str, Any]] = {}

    def use_server(self, admin_url: str) -> None:
        """The run's server (``postgres_database``'s): templates are made and copied there."""
        self._admin_url = admin_url

    def fill(self, url: str, key: Hashable, make: Callable[[str], Made]) -> Made:
        """Makes the new, empty database at ``url`` what ``make`` makes of one, and returns what
        ``make`` returned: through a copy of the template for ``key``, which ``make`` sets up
        the first time. A database on another server, or one that is not empty, gets ``make``
        itself."""
        admin_url = self._admin_url
        if admin_url is None or _server(url) != _server(admin_url) or not _is_empty(url):
            return make(url)
        if key not in self._made:
            template = f"calbook_template_{uuid.uuid4().hex[:12]}"
            create_database(admin_url, template)
            template_url = make_url(url).set(database=template).render_as_string(False)
            self._made[key] = (template, make(template_url))
        template, made = self._made[key]
        name = make_url(url).database
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        create_database(admin_url, name, template=template)
        return made

    def drop_all(self) -> None:
        """Drops the templates (at the end of the run)."""
        if self._admin_url is None:
            return
        with psycopg.connect(self._admin_url, autocommit=True) as conn:
            for template, _ in self._made.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
        self._made.clear()


# This process's templates (pytest-xdist's workers are processes: each has its own).
TEMPLATES = Templates()
