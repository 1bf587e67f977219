"""A Radicale CalDAV server of the test's own on a free loopback port, with its own storage
folder, which the test may stop, freeze (it accepts connections but never answers) and start
again.

Radicale's defaults are changed where they would slow tests down or refuse everyone: no
configuration files are read (``--config ""``), authentication is ``none`` (any user name,
any password) unless ``users`` are given (then an htpasswd file in plain text), and neither
failed logins nor server errors are delayed (``auth_delay``: Radicale's own default is 1 s,
for a test or benchmark of what a deployed Radicale costs). ``log_requests``: every request
and its answer's status in ``log_path`` (Radicale's ``info`` level).
"""

from __future__ import annotations

import http.client
import importlib.util
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import icalendar

from tests.conftest import backend_unavailable
from tests.servers import OwnServer, free_port, stop_process


class OwnRadicale(OwnServer):
    def __init__(
        self,
        folder: Path,
        users: dict[str, str] | None = None,
        *,
        auth_delay: float = 0.0,
        log_requests: bool = False,
    ) -> None:
        self.folder = folder
        self.users = users
        self.auth_delay = auth_delay
        self.log_requests = log_requests
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
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
            str(self.auth_delay),
            "--logging-level",
            "info" if self.log_requests else "warning",
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
        """Start Radicale and wait until it answers on its port. The port was free when chosen,
        but another test process may take it first (then Radicale cannot bind and another server
        answers there): the start is tried again on a new port."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            if self._started():
                return
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}/"
        raise RuntimeError(f"own radicale did not start: {self.log_path.read_text()[-2000:]}")

    def _started(self) -> bool:
        """Whether Radicale, started on ``port``, is the server that answers there."""
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False  # it could not start (its port taken meanwhile, most likely)
            if self._answers_as_radicale():
                return True
            time.sleep(0.02)
        stop_process(self.process)
        raise TimeoutError("own radicale did not start")

    def _answers_as_radicale(self) -> bool:
        """Whether a CalDAV server answers OPTIONS on the port; anything else that took the
        port first is stopped waiting for, and the port given up."""
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            try:
                connection.request("OPTIONS", "/")
                dav = connection.getresponse().getheader("DAV") or ""
            finally:
                connection.close()
        except OSError:
            return False  # not listening yet
        if "calendar-access" in dav:
            return True
        stop_process(self.process)  # another server holds the port
        return False

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


def radicale_server(
    folder: Path, users: dict[str, str] | None = None, **options: Any
) -> OwnRadicale:
    """A Radicale to run ``with`` (``users``: user → plain password for htpasswd; None: no
    auth; ``options``: ``auth_delay``, ``log_requests``)."""
    require_radicale()
    return OwnRadicale(folder, users, **options)


# Test data: who connects, and the events they keep
PASSWORD = "correct-horse-battery"  # a calendar user's, where the server asks for one


def fresh_user() -> str:
    """A user name no other test uses (Radicale makes a user's collections on first use)."""
    return f"user-{uuid.uuid4().hex[:10]}"


def connection_doc(
    name: str,
    server: OwnRadicale,
    user: str,
    password: str = PASSWORD,
    calendar: str = "Personal",
    **fields: Any,
) -> dict[str, Any]:
    """A calendar connection of a provisioning document (``calendarConnections``) named
    ``name``: ``user``'s calendar ``calendar`` on ``server`` (``fields`` added, e.g.
    ``writeBack``)."""
    return {
        "name": name,
        "url": server.url,
        "username": user,
        "password": password,
        "calendar": calendar,
        **fields,
    }


def stamp(instant: datetime) -> str:
    """An instant as iCalendar writes it in UTC (``20310106T120000Z``)."""
    return instant.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def vevent(uid: str, *lines: str) -> str:
    """An iCalendar object with one event ``uid`` of ``lines``; ``@`` lines stand for a
    VTIMEZONE block put before the event."""
    timezones = [line[1:] for line in lines if line.startswith("@")]
    own = [line for line in lines if not line.startswith("@")]
    return vevents(uid, own, before=timezones)


def vevents(uid: str, *events: list[str], before: Sequence[str] = ()) -> str:
    """An iCalendar object with events that share the UID ``uid`` (a series and the occurrences
    it moves or cancels), each of its own ``lines``, after the lines ``before``."""
    body: list[str] = []
    for lines in events:
        body += ["BEGIN:VEVENT", f"UID:{uid}", "DTSTAMP:20300101T000000Z", *lines, "END:VEVENT"]
    head = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//calendar-booking tests//EN"]
    return "\r\n".join([*head, *before, *body, "END:VCALENDAR", ""])


def events_with_uid(calendar, uid: str) -> list[icalendar.Event]:
    """The VEVENTs in ``calendar`` (a caldav Calendar) whose UID is ``uid``."""
    found = []
    for obj in calendar.events():
        found += icalendar.Calendar.from_ical(obj.data).walk("VEVENT")
    return [e for e in found if str(e["UID"]) == uid]
