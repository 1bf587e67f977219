"""Calendar connections: the sub account's connected calendars with their sync and write-back
health, and adding (CalDAV, with presets; a feed), testing (listing the account's calendars to
choose from), changing, syncing now and removing them through
``app.services.integrations.calendars.connections``. Google and Microsoft 365 accounts are
connected through their consent pages (``app.dashboard.calendar_accounts``).

"Sync now" runs the worker's sync service in the request, bounded by the read's deadline (a
multiple of ``CALDAV_TIMEOUT_SECONDS``), so the page can say at once how it went (the periodic
sync goes on as before). A password typed here is stored encrypted and never put into a page
again, not even the form it was typed into.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import BooleanField, HiddenField, PasswordField, StringField, URLField

from app.dashboard.calendar_accounts import CALDAV_PRESETS, FeedForm
from app.dashboard.changes import Refused, commit_or_show, press_button
from app.dashboard.forms import FORM_EXPIRED, ActionForm
from app.dashboard.views import dashboard
from app.extensions import db
from app.models import CalendarConnection, ConnectionKind, SubAccount
from app.models.calendar_connection import OAUTH_KINDS
from app.models.types import utcnow
from app.services.accounts.users import open_sub_account
from app.services.availability.hosts import hosts_of
from app.services.common.errors import InvalidRequest, ServiceError
from app.services.integrations.calendars.connections import (
    ask_for_sync,
    ask_for_test,
    connect_calendar,
    disconnect_calendar,
    find_connection,
    freshness_of,
    latest_test,
    list_connections,
    set_connection_host,
    update_connection,
)
from app.services.integrations.calendars.consent import provider_setup

FIELDS = {"writeBack": "write_back"}


class NewConnectionForm(FlaskForm):
    name = StringField("Name")
    url = URLField("CalDAV URL (the server or your principal URL)")
    username = StringField("Username")
    password = PasswordField("Password")
    calendar = StringField("Calendar (optional: its name or URL; empty: the account's only one)")
    write_back = BooleanField("Write bookings into this calendar", default=True)

    def document(self) -> dict:
        return {
            "name": (self.name.data or "").strip(),
            "url": (self.url.data or "").strip(),
            "username": (self.username.data or "").strip(),
            "password": self.password.data or "",
            "calendar": (self.calendar.data or "").strip() or None,
            "writeBack": self.write_back.data,
        }


class EditConnectionForm(NewConnectionForm):
    password = PasswordField("New password (empty: keep the stored one)")
    active = BooleanField("Active: synced, and written to when write-back is on")

    def document(self, kind: str = ConnectionKind.CALDAV) -> dict:
        document = {**super().document(), "active": self.active.data}
        if not document["password"]:
            del document["password"]
        # The fields a connection of this kind has (the form shows only those).
        kept_by_kind: dict[str, AbstractSet[str]] = {
            ConnectionKind.CALDAV: document.keys(),
            ConnectionKind.ICS: {"name", "url", "active"},
        }
        kept = kept_by_kind.get(kind, {"name", "writeBack", "active"})
        return {key: value for key, value in document.items() if key in kept}


class ChooseCalendarForm(FlaskForm):
    calendar = HiddenField()


def _connection_url(connection: CalendarConnection) -> str:
    return url_for(
        "dashboard.connection",
        sub_account_id=connection.sub_account_id,
        connection_id=connection.id,
    )


@dashboard.route("/s/<int:sub_account_id>/connections", methods=["GET", "POST"])
def connections(sub_account_id: int) -> str | Response | tuple[str, int]:
    """The connections and the form for a new one (POST adds it)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    form = NewConnectionForm()
    if request.method == "GET":
        preset = CALDAV_PRESETS.get(request.args.get("preset", ""))
        if preset is not None:
            form.url.data = preset.url
            form.name.data = preset.label
        return list_page(sub_account, form)
    if not form.validate_on_submit():
        return list_page(sub_account, form), 400
    try:
        connection = commit_or_show(
            form, lambda: connect_calendar(sub_account, form.document()), FIELDS
        )
    except Refused:
        return list_page(sub_account, form)
    flash(
        f"Connection “{connection.name}” added. Test it to check the server and choose its"
        " calendar, or sync it now."
    )
    return redirect(_connection_url(connection))


def list_page(
    sub_account: SubAccount,
    form: NewConnectionForm | None = None,
    *,
    feed_form: FeedForm | None = None,
) -> str:
    """The connections, the accounts to connect (and what an operator must set for each not
    set up), the CalDAV form (with its preset, if one was picked) and the feed form."""
    return render_template(
        "dashboard/connections.html",
        sub_account=sub_account,
        connections=list_connections(sub_account.id),
        form=form or NewConnectionForm(formdata=None),
        feed_form=feed_form or FeedForm(formdata=None),
        providers=[provider_setup(kind) for kind in OAUTH_KINDS],
        presets=CALDAV_PRESETS.values(),
        preset=CALDAV_PRESETS.get(request.args.get("preset", "")),
        action_form=ActionForm(),
    )


@dashboard.route("/s/<int:sub_account_id>/connections/feed", methods=["POST"])
def connection_feed(sub_account_id: int) -> str | Response | tuple[str, int]:
    """Subscribe to a calendar feed (read-only busy time), read at once."""
    sub_account = open_sub_account(current_user, sub_account_id)
    form = FeedForm()
    if not form.validate_on_submit():
        return list_page(sub_account, feed_form=form), 400
    try:
        connection = commit_or_show(
            form,
            lambda: connect_calendar(sub_account, form.document()),
            {"name": "feed_name", "url": "feed_url"},
        )
    except Refused:
        return list_page(sub_account, feed_form=form)
    flash(f"Subscribed to “{connection.name}”: reading it now.")
    return redirect(_connection_url(connection))


@dashboard.route("/s/<int:sub_account_id>/connections/<int:connection_id>", methods=["GET", "POST"])
def connection(sub_account_id: int, connection_id: int) -> str | Response | tuple[str, int]:
    """A connection's health and its settings (POST saves them)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    if request.method == "GET" and "HX-Request" in request.headers:
        if request.args.get("part") == "test":
            return _test_part(sub_account, found)  # the test's result, looked at again
        return _health(sub_account, found)  # the health section, looked at again
    form = EditConnectionForm(obj=found)
    if request.method == "GET":
        return _page(sub_account, found, form)
    if not form.validate_on_submit():
        return _page(sub_account, found, form), 400
    try:
        commit_or_show(
            form,
            lambda: update_connection(sub_account, found.id, form.document(found.kind)),
            FIELDS,
        )
    except Refused:
        return _page(sub_account, found, form)  # rolled back: as stored
    flash("Connection saved.")
    return redirect(_connection_url(found))


@dashboard.route("/s/<int:sub_account_id>/connections/<int:connection_id>/test", methods=["POST"])
def connection_test(sub_account_id: int, connection_id: int) -> str | Response:
    """Ask the worker to connect and list the account's calendars (stores nothing but what it
    found); the connection's page shows the result when it arrives."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    if not ActionForm().validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(_connection_url(found))
    if found.kind in OAUTH_KINDS:  # its calendars are chosen on a page of their own
        return redirect(
            url_for(
                "dashboard.connection_calendars",
                sub_account_id=sub_account.id,
                connection_id=found.id,
            )
        )
    try:
        ask_for_test(sub_account, found.id, now=utcnow())
        db.session.commit()
    except ServiceError as err:
        db.session.rollback()
        form = EditConnectionForm(formdata=None, obj=found)
        return _page(sub_account, found, form, test_error=err.message)
    return redirect(_connection_url(found) + "#test")


@dashboard.route(
    "/s/<int:sub_account_id>/connections/<int:connection_id>/calendar", methods=["POST"]
)
def connection_calendar(sub_account_id: int, connection_id: int) -> Response:
    """Use one of the calendars the test listed."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    form = ChooseCalendarForm()
    if not form.validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(_connection_url(found))
    try:
        update_connection(sub_account, found.id, {"calendar": form.calendar.data or None})
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Calendar not changed: {err.message}")
        return redirect(_connection_url(found))
    flash("Calendar chosen. Sync now to read its busy time.")
    return redirect(_connection_url(found))


@dashboard.route("/s/<int:sub_account_id>/connections/<int:connection_id>/sync", methods=["POST"])
def connection_sync(sub_account_id: int, connection_id: int) -> Response:
    """Ask the worker to read the connection now; its page shows the result when it has."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    if not ActionForm().validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(_connection_url(found))
    try:
        ask_for_sync(sub_account, found.id, now=utcnow())
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not synced: {err.message}")
        return redirect(_connection_url(found))
    flash("Sync asked for: the result shows here as soon as the worker has read the calendar.")
    return redirect(_connection_url(found))


@dashboard.route("/s/<int:sub_account_id>/connections/<int:connection_id>/remove", methods=["POST"])
def connection_remove(sub_account_id: int, connection_id: int) -> Response:
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    if not ActionForm().validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(_connection_url(found))
    name = found.name
    disconnect_calendar(sub_account, found.id)
    db.session.commit()
    flash(f"Connection “{name}” removed, and the busy time it brought with it.")
    return redirect(url_for("dashboard.connections", sub_account_id=sub_account.id))


def _health(sub_account: SubAccount, found: CalendarConnection) -> str:
    return render_template(
        "dashboard/connection_freshness.html",
        sub_account=sub_account,
        c=found,
        tz=sub_account.settings.timezone,
        freshness=freshness_of(sub_account, found.id, now=utcnow()),
    )


def _test_part(sub_account: SubAccount, found: CalendarConnection) -> str:
    return render_template(
        "dashboard/connection_test.html",
        sub_account=sub_account,
        c=found,
        choose_form=ChooseCalendarForm(formdata=None),
        test=latest_test(found),
        test_error=None,
    )


@dashboard.route("/s/<int:sub_account_id>/connections/<int:connection_id>/host", methods=["POST"])
def connection_host(sub_account_id: int, connection_id: int) -> Response:
    """Make the connection another host's calendar."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    try:
        host_id = int(request.form.get("host_id", ""))
    except ValueError:
        host_id = 0
    press_button(
        ActionForm(),
        lambda: set_connection_host(sub_account, found.id, host_id),
        "Whose calendar it is: saved. Its busy time is that host's now.",
    )
    return redirect(_connection_url(found))


def _page(
    sub_account: SubAccount,
    found: CalendarConnection,
    form: EditConnectionForm,
    *,
    test_error: str | None = None,
) -> str:
    return render_template(
        "dashboard/connection.html",
        sub_account=sub_account,
        connection=found,
        hosts=[h for h in hosts_of(sub_account.id) if h.active or h.id == found.host_id],
        form=form,
        action_form=ActionForm(),
        choose_form=ChooseCalendarForm(formdata=None),
        test=latest_test(found),
        test_error=test_error,
        freshness=freshness_of(sub_account, found.id, now=utcnow()),
    )
