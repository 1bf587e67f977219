"""A Radicale CalDAV server of the test's own on a free loopback port, with its own storage
folder, which the test may stop, freeze (it accepts connections but never answers) and start
again.

Radicale's defaults are changed where they would slow tests down or refuse everyone: no
configuration files are read (``--config ""``), authentication is ``none`` (any user name,
any password) unless ``users`` are given (then an htpasswd file in plain text), and neither
failed logins nor server errors are delayed.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import backend_unavailable
from tests.servers import free_port


class OwnRadicale:
    def __init__(self, folder: Path, users: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.users = users
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen | None = None
        self.log_path = folder / "radicale.log"

    @property
    def storage(self) -> Path:
        """Radicale's collections on disk: ``<storage>/<user>/<calendar id>/<item>.ics``."""
        return self.folder / "storage" / "collection-root"

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "radicale",
            "--config",
            "",
            "--server-hosts",
            f"127.0.0.1:{self.port}",
            "--storage-filesystem-folder",
            str(self.folder / "storage"),
            "--server-delay-on-error",
            "0",
            "--auth-delay",
            "0",
            "--logging-level",
            "warning",
        ]
        if self.users is None:
            return [*command, "--auth-type", "none"]
        htpasswd = self.folder / "htpasswd"
        htpasswd.write_text("".join(f"{user}:{pw}\n" for user, pw in self.users.items()))
        return [
            *command,
            "--auth-type",
            "htpasswd",
            "--auth-htpasswd-filename",
            str(htpasswd),
            "--auth-htpasswd-encryption",
            "plain",
        ]

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"radicale exited: {self.log_path.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise TimeoutError("own radicale did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a frozen server cannot act on TERM
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def freeze(self) -> None:
        """The server stops answering; the kernel still accepts connections (a hung server)."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    # Test data, through the caldav client (never hand-written WebDAV)
    def client(self, user: str, password: str | None = None):  # -> caldav.DAVClient
        import caldav

        if password is None:
            password = (self.users or {}).get(user, "any")
        return caldav.DAVClient(
            url=self.url, username=user, password=password, timeout=10, enable_rfc6764=False
        )

    def make_calendar(self, user: str, name: str, password: str | None = None):
        """A new calendar of ``user`` with display name ``name``; returns the caldav Calendar."""
        principal = self.client(user, password).principal()
        return principal.make_calendar(name=name, cal_id=uuid.uuid4().hex)


def require_radicale() -> None:
    if importlib.util.find_spec("radicale") is None:
        backend_unavailable("radicale is not installed (requirements-dev.txt)")


@contextmanager
def radicale_server(folder: Path, users: dict[str, str] | None = None) -> Iterator[OwnRadicale]:
    """A running Radicale (``users``: user → plain password for htpasswd; None: no auth)."""
    require_radicale()
    server = OwnRadicale(folder, users)
    server.start()
    try:
        yield server
    finally:
        server.stop()
