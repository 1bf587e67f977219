"""The dashboard: server-rendered pages where people run the calendar the agents book into.

It calls the same services as the API and the worker and never imports the API. Sessions are
Flask-Login's over Flask's signed cookie (``app.config``: HttpOnly, SameSite=Lax, Secure in
production, refused by the server after ``DASHBOARD_SESSION_HOURS``), which names a session
the server keeps (``dashboard_sessions``), so signing out and password changes end it for
good; every form carries a CSRF
token (Flask-WTF).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from itertools import count

from flask import Flask, current_app, redirect, send_from_directory, url_for
from flask_login import LoginManager, current_user
from markupsafe import Markup, escape
from werkzeug.wrappers import Response

from app.dashboard import (
    agent_consent,  # noqa: F401 - registers the page where an agent is allowed to connect
    api_keys,  # noqa: F401 - registers the API key pages
    availability,  # noqa: F401 - registers the availability page
    availability_profiles,  # noqa: F401 - registers the availability profile pages
    bookings,  # noqa: F401 - registers the booking pages
    calendar,  # noqa: F401 - registers the calendar
    calendar_accounts,  # noqa: F401 - registers Google/Microsoft consent and calendar choice
    connections,  # noqa: F401 - registers the calendar connection pages
    contacts,  # noqa: F401 - registers the contact pages
    event_types,  # noqa: F401 - registers the event type pages
    hosts,  # noqa: F401 - registers the host pages
    notifications,  # noqa: F401 - registers the mail and webhook pages
    password_resets,  # noqa: F401 - registers the forgot-password pages
    reschedule,  # noqa: F401 - registers the reschedule page
    settings,  # noqa: F401 - registers the settings page
    team,  # noqa: F401 - registers the team pages
)
from app.dashboard.auth import auth, signed_in_user
from app.dashboard.calendar_accounts import oauth
from app.dashboard.views import dashboard
from app.scheduling.timezones import zone

login_manager = LoginManager()
login_manager.login_view = "auth.sign_in"
login_manager.login_message = "Please sign in to continue."
login_manager.session_protection = "strong"


login_manager.user_loader(signed_in_user)


def register_dashboard(app: Flask) -> None:
    login_manager.init_app(app)
    app.register_blueprint(auth)
    app.register_blueprint(dashboard)
    app.register_blueprint(oauth)
    app.add_url_rule("/", "root", _root)
    app.add_url_rule("/favicon.ico", "favicon", _favicon)
    app.add_template_filter(local_time)
    app.add_template_filter(clock)
    app.add_template_filter(labelled_cells)


def _favicon() -> Response:
    """The icon browsers ask for at ``/favicon.ico`` on any page (the dashboard's pages name
    it too): the SVG, which every current browser draws."""
    static_folder = current_app.static_folder
    assert static_folder is not None  # the app's static folder, Flask's default
    return send_from_directory(
        static_folder, "favicon.svg", mimetype="image/svg+xml", max_age=86400
    )


def local_time(instant: datetime, timezone: str) -> str:
    """``Mon 7 Dec 2026, 10:00`` in ``timezone``."""
    local = instant.astimezone(zone(timezone))
    return f"{local:%a} {local.day} {local:%b %Y, %H:%M}"


def clock(instant: datetime, timezone: str) -> str:
    """``10:00`` in ``timezone``."""
    return f"{instant.astimezone(zone(timezone)):%H:%M}"


_CELL = re.compile(r"<(td|th)(?=[\s>])", re.IGNORECASE)


def labelled_cells(row: str, columns: Sequence[str]) -> Markup:
    """A table row's HTML with each data cell labelled by its column (``data-label``): on a
    phone a table's rows stack, and each cell shows its label beside it (dashboard.css), so a
    row reads "Last sync Never", not a bare "Never". Row headings (``<th>``) name the row and
    keep no label; cells are counted in order, so a row has no ``colspan``."""
    position = count()

    def label(cell: re.Match[str]) -> str:
        index = next(position)
        if cell.group(1).lower() == "th" or index >= len(columns):
            return cell.group(0)
        return f'{cell.group(0)} data-label="{escape(columns[index])}"'

    return Markup(_CELL.sub(label, str(row)))


def _root() -> Response:
    """Signed in: the dashboard; otherwise the sign-in page."""
    if current_user.is_authenticated:
        return redirect(url_for("dashboard.home"))
    return redirect(url_for("auth.sign_in"))
