"""A Redis server of the test's own on a free loopback port, which the test may stop, freeze
and start again (never the machine's shared Redis)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from tests.conftest import backend_unavailable
from tests.servers import free_port


class OwnRedis:
    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis(port=self.port)
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise TimeoutError("own redis did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a frozen server cannot act on TERM
            self.process.terminate()
            self.process.wait(timeout=10)

    def freeze(self) -> None:
        """The server stops answering but keeps its connections open (a hung Redis)."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)


@contextmanager
def own_redis_server(folder: Path) -> Iterator[OwnRedis]:
    binary = shutil.which("redis-server")
    if binary is None:
        backend_unavailable("redis-server is not installed")
    server = OwnRedis(binary, folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()
