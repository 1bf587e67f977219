"""A Xandikos CalDAV server of the test's own on a free loopback port, with its own storage
folder, which the test may stop, freeze (it accepts connections but never answers) and start
again: a second, independently written CalDAV server beside Radicale
(``tests.radicale_servers``), so that what the app reads is not only what one server's
query and storage code happen to do.

How it differs from Radicale, and what that means for tests:

- One principal. Xandikos serves a single user's collections, at ``/user/`` (its
  ``--current-user-principal``), whatever user name a client sends; ``--defaults`` creates it
  with a calendar named ``calendar`` (and an address book, inbox and outbox). A ``user`` given
  to ``make_calendar`` or ``client`` is only sent along, never separates anything: tests that
  share a server must give each of their calendars a name of its own, or connect by the
  calendar's URL.
- No authentication. Xandikos checks passwords itself only over HTTPS (``--htpasswd`` needs
  ``--autocert``, a self-signed certificate that the app's CalDAV client rightly refuses), so
  every request is accepted and a test that needs a wrong password to fail uses Radicale.
- It stores what it was sent in a normalised form (properties reordered, lines refolded), in
  a git repository per collection; the items are also files in the working tree
  (``storage``).
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import backend_unavailable
from tests.servers import OwnServer, free_port

PRINCIPAL = "/user/"  # Xandikos's default, given explicitly so the layout below holds


class OwnXandikos(OwnServer):
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.principal_url = f"http://127.0.0.1:{self.port}{PRINCIPAL}"
        self.log_path = folder / "xandikos.log"

    @property
    def storage(self) -> Path:
        """Xandikos's collections on disk: ``<storage>/user/calendars/<calendar id>/<item>``."""
        return self.folder / "storage"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "xandikos.web",
            "--directory",
            str(self.storage),
            "--listen-address",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--current-user-principal",
            PRINCIPAL,
            # The principal and its default calendar, made on first start (and kept after).
            "--defaults",
            # A socket handed over by systemd (LISTEN_FDS in the environment) would win over
            # --port; these servers always open their own.
            "--no-detect-systemd",
        ]

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"xandikos exited: {self.log_path.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise TimeoutError("own xandikos did not start")

    # Test data, through the caldav client (never hand-written WebDAV)
    def client(self, user: str = "user", password: str | None = None):  # -> caldav.DAVClient
        """A caldav client of the server; ``user`` and ``password`` are sent but not checked."""
        import caldav

        return caldav.DAVClient(
            url=self.url,
            username=user,
            password=password or "any",
            timeout=10,
            enable_rfc6764=False,
        )

    def make_calendar(self, user: str, name: str, password: str | None = None):
        """A new calendar with display name ``name`` (in the one principal, whatever ``user``
        is: see the module docstring); returns the caldav Calendar."""
        principal = self.client(user, password).principal()
        return principal.make_calendar(name=name, cal_id=uuid.uuid4().hex)

    def put_event(self, calendar: Any, uid: str, ics: str) -> Any:
        """Store the iCalendar text ``ics`` (one event ``uid``: a series and its overrides)
        in ``calendar`` at ``<UID>.ics``, byte for byte as given (caldav's ``raw_data``: no
        clean-up, no SEQUENCE bump), replacing what is there; returns the caldav Event."""
        return put_raw_event(calendar, uid, ics)

    def delete_event(self, calendar: Any, uid: str) -> None:
        """Remove the event that ``put_event`` stored for ``uid``."""
        delete_raw_event(calendar, uid)


def put_raw_event(calendar: Any, uid: str, ics: str) -> Any:
    """``ics`` PUT unchanged at ``<calendar>/<UID>.ics`` through caldav (any CalDAV server):
    quirk fixtures must reach the server as the client that made them wrote them, which
    ``Calendar.add_event`` (parsed, fixed up and re-serialised by caldav) would not do."""
    import caldav

    event = caldav.Event(
        client=calendar.client, url=_item_url(calendar, uid), parent=calendar, id=uid
    )
    return event.save(raw_data=ics.encode(), increase_seqno=False)


def delete_raw_event(calendar: Any, uid: str) -> None:
    """Delete what ``put_raw_event`` stored for ``uid``."""
    import caldav

    caldav.Event(
        client=calendar.client, url=_item_url(calendar, uid), parent=calendar, id=uid
    ).delete()


def _item_url(calendar: Any, uid: str) -> Any:
    return calendar.url.join(quote(uid, safe="") + ".ics")


def require_xandikos() -> None:
    if importlib.util.find_spec("xandikos") is None:
        backend_unavailable("xandikos is not installed (requirements-dev.txt)")


def xandikos_server(folder: Path) -> OwnXandikos:
    """A Xandikos to run ``with`` (no authentication: see the module docstring)."""
    require_xandikos()
    return OwnXandikos(folder)


# Fixtures, for a module to import or for conftest.py to register with
# ``pytest_plugins = ("tests.xandikos_servers",)``.
@pytest.fixture(scope="module")
def xandikos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnXandikos]:
    """One server for the module; tests keep apart by calendars of their own."""
    with xandikos_server(tmp_path_factory.mktemp("xandikos")) as server:
        yield server


@pytest.fixture
def own_xandikos(tmp_path: Path) -> Iterator[OwnXandikos]:
    """A server of the test's own, to stop or freeze."""
    with xandikos_server(tmp_path / "own-xandikos") as server:
        yield server
