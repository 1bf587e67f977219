"""A Redis server of the test's own on a free loopback port, which the test may stop, freeze
and start again (never the machine's shared Redis)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from tests.conftest import backend_unavailable
from tests.servers import OwnServer, free_port


class OwnRedis(OwnServer):
    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis(port=self.port)

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


def own_redis_server(folder: Path) -> OwnRedis:
    """A Redis to run ``with``."""
    binary = shutil.which("redis-server")
    if binary is None:
        backend_unavailable("redis-server is not installed")
    return OwnRedis(binary, folder)
