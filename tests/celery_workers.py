"""A real ``celery worker`` process as the Procfile starts it, on the tests' clock, and a wait
for what it does."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers import ROOT, on_the_tests_clock, stop_process


def celery_command() -> list[str]:
    """celery, on this process's clock (as ``tests.servers`` starts gunicorn: on a shifted test
    clock the worker keeps the tests' "now", a reminder's due time or a finished booking's;
    forked pool processes inherit it)."""
    return on_the_tests_clock("celery", "celery.__main__", "main")


@contextmanager
def celery_worker(
    database_url: str,
    log_path: Path,
    processes: int | None = 1,
    name: str | None = None,
    **env: str,
) -> Iterator[subprocess.Popen]:
    """``celery -A worker worker`` as the Procfile starts it (in a process group of its own,
    pool processes included), on the tests' clock, until it says it is ready; with
    ``processes`` pool processes (None: the Procfile's command as it is, the configured
    number), and named ``name@<host>`` when given (several workers of one test, each with a
    heartbeat of its own)."""
    concurrency = [] if processes is None else ["-c", str(processes)]
    node = [] if name is None else ["-n", f"{name}@%h"]
    arguments = ["worker", "--loglevel", "INFO", *concurrency, *node]
    with _celery(arguments, "ready.", database_url, log_path, env) as process:
        yield process


@contextmanager
def celery_beat(database_url: str, log_path: Path, **env: str) -> Iterator[subprocess.Popen]:
    """``celery -A worker beat`` as the Procfile starts it, on the tests' clock, until it has
    started; its schedule file is its own (beside ``log_path``)."""
    schedule = log_path.with_name(log_path.stem + "-schedule")
    arguments = ["beat", "--loglevel", "INFO", "-s", str(schedule)]
    with _celery(arguments, "beat: Starting", database_url, log_path, env) as process:
        yield process


@contextmanager
def _celery(
    arguments: list[str], ready: str, database_url: str, log_path: Path, env: dict[str, str]
) -> Iterator[subprocess.Popen]:
    """``celery -A worker ARGUMENTS`` on ``database_url``, logging to ``log_path``, until its
    log says ``ready``; stopped, its whole process group with it, on the way out."""
    process_env = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")
    }
    process_env.update(DATABASE_URL=database_url, SECRET_KEY="test-secret-key", **env)
    start = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "a") as log:
        process = subprocess.Popen(
            [*celery_command(), "-A", "worker", *arguments],
            cwd=ROOT,
            env=process_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while ready not in log_path.read_text()[start:]:
                assert process.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, f"celery {arguments[0]} did not start"
                time.sleep(0.2)
            yield process
        finally:
            stop_process(process, timeout=30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # pool processes left behind, if any


def wait_for(predicate, timeout: float = 60.0) -> bool:
    """Whether ``predicate()`` turns true within ``timeout`` seconds (asked five times a second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


# What a worker logs of each task at INFO: "Task <name>[<id>] received" when it takes it (a
# retry or a task with a countdown is received again), then "… succeeded in <s>s: <value>",
# "… retry: …" or "… raised …" when it is done with it.
_RECEIVED = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] received")
_DONE = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] (?:succeeded|retry|raised)")


def worker_idle(log_path: Path, since: int = 0) -> bool:
    """Whether the worker logging to ``log_path`` (from byte ``since``: a later worker's part of
    a shared log) has finished every task it received (none is running or waiting for its
    countdown): an observable fact to wait for before asserting that something did not
    happen."""
    text = log_path.read_text()[since:]
    received, done = Counter(_RECEIVED.findall(text)), Counter(_DONE.findall(text))
    return all(done[task_id] >= count for task_id, count in received.items())


def tasks_received(log_path: Path, since: int = 0) -> int:
    """How many task messages the worker logging to ``log_path`` took from its broker (from
    byte ``since`` of its log): one that has stopped consuming takes none."""
    return len(_RECEIVED.findall(log_path.read_text()[since:]))


def task_returned(log_path: Path, task_id: str, timeout: float = 60.0) -> str | None:
    """What task ``task_id`` returned, as the worker logging to ``log_path`` logged it, once it
    has (None if it did not succeed within ``timeout`` seconds)."""
    succeeded = re.compile(rf"Task [\w.]+\[{re.escape(task_id)}\] succeeded in [\d.e-]+s: (.*)")
    found: list[str] = []

    def logged() -> bool:
        found[:] = succeeded.findall(log_path.read_text())
        return bool(found)

    return found[-1].strip() if wait_for(logged, timeout) else None
