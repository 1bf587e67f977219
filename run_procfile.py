"""``make run``'s process manager: ``python run_procfile.py [--port N] PROCESS…`` runs those
``Procfile`` processes under honcho as ``honcho start`` does (the same output, ``PORT`` and
``.env``), with three differences, so that one Ctrl-C stops them all cleanly and ``make run``
exits 0.

* **The terminal.** Ctrl-C sends SIGINT to the terminal's foreground process group, make
  included. Interrupted, GNU make waits for its recipe and then kills itself with the same
  signal ("make: *** [Makefile:…: run] Interrupt", status 130), whatever the recipe returns. So
  this process moves into a process group of its own and makes it the terminal's foreground,
  as a shell's job control does: Ctrl-C reaches it (and honcho's helper processes) alone, and
  make exits with this process's status. The terminal goes back to make's group before this
  process exits (should it die first, make ends too and the shell takes the terminal back).
  Ctrl-Z is ignored meanwhile: a stopped group the shell does not know of would hold the
  terminal. Without a controlling terminal nothing changes, and make ends as above.
* **The stop.** honcho runs each command in a session of its own and stops it by sending SIGTERM
  to its whole process group, the Celery worker's pool processes included. Celery leaves SIGTERM
  at its default action in them, so they die at once, cutting short the tasks they run, and the
  worker's main process logs "Process 'ForkPoolWorker-N' … exited with 'signal 15 (SIGTERM)'" as
  an ERROR. Here each command runs with ``exec`` (so the pid honcho knows is the program's, not
  a shell's) and is stopped by one SIGTERM to that program alone, which stops its own children
  as it is built to: gunicorn's master lets its workers finish their requests, the worker does
  its warm shutdown (running tasks finish, then the pool closes), beat saves its schedule.
* **The wait.** honcho SIGKILLs whatever still runs 5 s after the first process ended; an idle
  worker's warm shutdown on the embedded broker takes about 6 s, longer with a task running.
  Here the wait is ``GRACE_SECONDS`` (gunicorn's own ``graceful_timeout`` is 20); SIGKILL to
  the whole group stays the last resort.

The exit status is 0 when the stop was asked for (SIGINT or SIGTERM) and every process ended by
itself with status 0, 1 when one did not; otherwise honcho's (that of the first process to end,
which ended the others).

Without ``DATABASE_URL`` (in the environment or ``.env``) this process starts the embedded
PostgreSQL (``app.embedded_database``) before the programs, hands them its URL as
``DATABASE_URL``, and stops it after they have ended.

Production is not concerned: its process manager runs the ``Procfile`` by its own rules
(docs/deployment.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import honcho.manager
from honcho.compat import ProcessManager
from honcho.environ import expand_processes, parse, parse_procfile
from honcho.manager import Manager
from honcho.printer import Printer

GRACE_SECONDS = 25
# Flask's instance folder for the ``app`` package: where the embedded default keeps its data.
INSTANCE_FOLDER = Path(__file__).resolve().parent / "instance"
ASKED_TO_STOP = {130, 143}  # honcho's status after SIGINT, SIGTERM


class SignalTheProgram(ProcessManager):
    """Stops a process with SIGTERM to its pid alone (the program, thanks to ``exec``); kills
    it with SIGKILL to its whole process group, as honcho does."""

    def __init__(self) -> None:
        super().__init__()
        self.asked_to_stop: set[int] = set()

    def terminate(self, pid: int) -> None:
        self.asked_to_stop.add(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)


class CleanStopManager(Manager):
    """honcho's Manager, stopping with ``SignalTheProgram``, killing ``grace_seconds`` after
    the first process ended, and telling whether every process ended with status 0.

    The one place leaning on honcho's internals, since honcho 2.0.0 has no public way to any of
    the three: ``Manager`` takes only a printer, stops processes through its private
    ``_procmgr``, waits the module's ``honcho.manager.KILL_WAIT`` (read by ``loop``, 5 s) and
    keeps each process's status in its private ``_processes``. honcho is pinned in
    requirements.txt; tests/conventions/test_library_internals.py fails when the pinned honcho
    changes them, and tests/system/test_make_run_stop.py when ``make run`` no longer stops
    cleanly."""

    def __init__(self, printer: Printer, grace_seconds: float = GRACE_SECONDS) -> None:
        super().__init__(printer)
        self._procmgr = SignalTheProgram()
        honcho.manager.KILL_WAIT = grace_seconds  # read by Manager.loop as it waits

    def all_stopped_cleanly(self) -> bool:
        """Every process ended with status 0, or of the SIGTERM this manager sent it: a program
        stopped a moment after it started (Ctrl-C at once) may not handle SIGTERM yet, and
        then ends of it, as asked."""
        asked = self._procmgr.asked_to_stop
        return all(
            p.get("returncode") == 0
            or (p.get("returncode") == -signal.SIGTERM and p.get("pid") in asked)
            for p in self._processes.values()
        )


def ignore_ctrl_z(*_: object) -> None:
    """Ctrl-Z's SIGTSTP, caught and dropped. A handler rather than SIG_IGN: honcho's helper
    processes are forked and keep it, while the programs they exec start with the default."""


@contextlib.contextmanager
def ttou_ignored() -> Iterator[None]:
    """A process outside the terminal's foreground group that sets that group is sent SIGTTOU
    (which stops it) unless it ignores the signal."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTTOU, previous)


@contextlib.contextmanager
def foreground_of_the_terminal() -> Iterator[None]:
    """Moves this process into a process group of its own, the controlling terminal's
    foreground group while the block runs; then gives the terminal back. Does nothing without
    a controlling terminal, or when started in the background."""
    try:
        terminal = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        yield
        return
    try:
        previous = os.getpgrp()
        if os.tcgetpgrp(terminal) != previous:
            yield
            return
        signal.signal(signal.SIGTSTP, ignore_ctrl_z)
        with ttou_ignored():
            os.setpgid(0, 0)
            os.tcsetpgrp(terminal, os.getpgrp())
        try:
            yield
        finally:
            with ttou_ignored(), contextlib.suppress(OSError):
                os.tcsetpgrp(terminal, previous)
    finally:
        os.close(terminal)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run Procfile processes under honcho; one Ctrl-C stops them cleanly."
    )
    parser.add_argument("-p", "--port", type=int, default=int(os.environ.get("PORT", "5000")))
    parser.add_argument("processes", nargs="+", metavar="PROCESS")
    args = parser.parse_args(argv)

    procfile = parse_procfile(Path("Procfile").read_text()).processes
    unknown = [name for name in args.processes if name not in procfile]
    if unknown:
        parser.error(f"not in the Procfile: {', '.join(unknown)}")
    dotenv = Path(".env")
    app_env = parse(dotenv.read_text()) if dotenv.is_file() else {}
    if not (os.environ.get("DATABASE_URL") or app_env.get("DATABASE_URL")):
        # The embedded default: this process holds the embedded PostgreSQL for the whole run
        # and stops it when it exits, after the programs (app.embedded_database).
        from app.embedded_database import embedded_database_url

        os.environ["DATABASE_URL"] = embedded_database_url(INSTANCE_FOLDER)

    manager = CleanStopManager(Printer(sys.stdout))
    chosen = {name: procfile[name] for name in args.processes}
    for process in expand_processes(chosen, env=app_env, port=args.port):
        manager.add_process(
            process.name, f"exec {process.cmd}", quiet=process.quiet, env=os.environ | process.env
        )
    with foreground_of_the_terminal():
        manager.loop()
    if manager.returncode in ASKED_TO_STOP:
        return 0 if manager.all_stopped_cleanly() else 1
    return manager.returncode


if __name__ == "__main__":
    sys.exit(main())
