"""One Ctrl-C stops ``make run`` cleanly: web, worker and beat end, none of them with an error
line, the embedded PostgreSQL stops after them, and make exits 0.

``make run`` runs in a session of its own with a pseudo-terminal as its controlling terminal,
and the Ctrl-C is the ^C character typed into that terminal: the kernel sends SIGINT to the
terminal's foreground process group, as it does for a person at a terminal. (``os.killpg`` of
make's process group would assume that group is the foreground; run_procfile.py changes the
foreground on purpose, as a shell's job control does, so the test types the ^C instead.)"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.servers import (
    BIN,
    embedded_server_running,
    free_port,
    project_copy,
    wait_until_serving,
)

pytestmark = pytest.mark.slow

STOP_BOUND_SECONDS = 30
ERROR_MARKS = ("ERROR", "Traceback", "SIGKILL", "exited with 'signal", "Error 130")
CTRL_C = b"\x03"

# Run a command with the terminal on its standard input as its controlling terminal (it is the
# leader of a new session: start_new_session), in its own process (exec).
ON_ITS_TERMINAL = """\
import fcntl, os, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
os.execvp(sys.argv[1], sys.argv[1:])
"""


def make_run_env() -> dict[str, str]:
    """The process environment with none of the service's own settings (so the embedded
    PostgreSQL, broker and in-memory limits) nor an enclosing make's."""
    dropped = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY", "APP_ENV", "PORT"}
    dropped |= {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    return {k: v for k, v in os.environ.items() if k not in dropped}


class Terminal:
    """A pseudo-terminal whose output (everything the session writes to it) is read as it
    comes, into ``log_path`` and ``text``."""

    def __init__(self, log_path: Path) -> None:
        self.primary, self.secondary = pty.openpty()
        self.log_path = log_path
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with open(self.log_path, "wb") as log:
            while True:
                try:
                    chunk = os.read(self.primary, 65536)
                except OSError:  # EIO: every process holding the terminal has ended
                    return
                if not chunk:
                    return
                self._chunks.append(chunk)
                log.write(chunk)
                log.flush()

    @property
    def text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", "replace").replace("\r\n", "\n")

    def type(self, data: bytes) -> None:
        os.write(self.primary, data)

    def close(self) -> None:
        self._reader.join(timeout=5)
        os.close(self.primary)


def process_table() -> dict[int, tuple[int, str]]:
    """Every process of the machine: pid → (parent pid, start time); zombies left out."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (command) "
        if fields[0] != "Z":
            table[int(entry.name)] = (int(fields[1]), fields[19])
    return table


def descendants(pid: int) -> dict[int, str]:
    """The processes under ``pid`` (children, theirs, …), with their start times."""
    table = process_table()
    found: dict[int, str] = {}
    parents = {pid}
    while parents:
        children = {p for p, (ppid, _) in table.items() if ppid in parents and p not in found}
        found.update({p: table[p][1] for p in children})
        parents = children
    return found


def still_running(processes: dict[int, str]) -> list[int]:
    table = process_table()
    return [pid for pid, started in processes.items() if table.get(pid, (0, ""))[1] == started]


@contextmanager
def make_run(project: Path, log_path: Path) -> Iterator[tuple[subprocess.Popen, Terminal]]:
    """``make run`` in ``project`` on a free port, on a terminal of its own, until web, worker
    and beat are up. The virtualenv is the one running the tests; ``-o`` tells make it
    is current, so nothing is installed. At the end, whatever still runs is killed."""
    port, venv = free_port(), BIN.parent
    command = ["make", "run", f"PORT={port}", f"VENV={venv}", "-o", f"{venv}/.runtime"]
    terminal = Terminal(log_path)
    process = subprocess.Popen(
        [sys.executable, "-c", ON_ITS_TERMINAL, *command],
        cwd=project,
        env=make_run_env(),
        stdin=terminal.secondary,
        stdout=terminal.secondary,
        stderr=terminal.secondary,
        start_new_session=True,
    )
    os.close(terminal.secondary)
    started: dict[int, str] = {}
    try:
        try:
            wait_until_serving(f"http://127.0.0.1:{port}/v1/api/openapi.json", timeout=90)
        except TimeoutError:
            pytest.fail(terminal.text)
        deadline = time.monotonic() + 60
        while not (
            re.search(r"celery@\S+ ready\.", terminal.text) and "beat: Starting" in terminal.text
        ):
            assert process.poll() is None, terminal.text
            assert time.monotonic() < deadline, terminal.text
            time.sleep(0.2)
        started = descendants(process.pid)
        yield process, terminal
    finally:
        # run_procfile.py and honcho's processes are in process groups of their own: one by one.
        for pid in still_running({**started, **descendants(process.pid)}):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        terminal.close()


def test_one_ctrl_c_stops_web_worker_and_beat_cleanly_and_make_exits_0(tmp_path):
    project = project_copy(tmp_path)
    with make_run(project, tmp_path / "make-run.log") as (process, terminal):
        processes = descendants(process.pid)  # make, the services, their workers and pools
        terminal.type(CTRL_C)
        typed = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_BOUND_SECONDS)
        while (
            still_running(processes) or embedded_server_running(project)
        ) and time.monotonic() - typed < STOP_BOUND_SECONDS:
            time.sleep(0.1)
        stopped_after = time.monotonic() - typed
        left = still_running(processes)
        server_left = embedded_server_running(project)
        returncode = process.poll()
        output = terminal.text

    assert not left and returncode is not None, (
        f"still running {stopped_after:.1f} s after the Ctrl-C: {left}\n{output}"
    )
    assert not server_left, f"the embedded PostgreSQL still runs after the Ctrl-C\n{output}"
    assert returncode == 0, output
    for name in ("web.1", "worker.1", "beat.1"):
        assert f"{name} stopped (rc=0)" in output, output
    errors = [line for line in output.splitlines() if any(m in line for m in ERROR_MARKS)]
    assert errors == [], output
