"""Calendar connections: the sub account's CalDAV calendars with their sync and write-back
health, and adding, testing (listing the account's calendars to choose from), changing,
syncing now and removing them through ``app.services.integrations.calendars.connections``.

"Sync now" runs the worker's sync service in the request, bounded by ``CALDAV_TIMEOUT_SECONDS``
per answer, so the page can say at once how it went (the periodic sync goes on as before). A
password typed here is stored encrypted and never put into a page again, not even the form it
was typed into.
"""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import BooleanField, HiddenField, PasswordField, StringField, URLField

from app.dashboard.changes import Refused, commit_or_show
from app.dashboard.forms import FORM_EXPIRED, ActionForm
from app.dashboard.views import dashboard
from app.extensions import db
from app.models import CalendarConnection, SubAccount
from app.models.types import utcnow
from app.services.accounts.users import open_sub_account
from app.services.common.errors import InvalidRequest, ServiceError
from app.services.integrations.calendars.connections import (
    CalendarChoice,
    connect_calendar,
    disconnect_calendar,
    find_connection,
    list_calendars,
    list_connections,
    sync_now,
    update_connection,
)
from app.services.integrations.calendars.sync import SyncResult

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

    def document(self) -> dict:
        document = {**super().document(), "active": self.active.data}
        if not document["password"]:
            del document["password"]
        return document


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
        return _list_page(sub_account, form)
    if not form.validate_on_submit():
        return _list_page(sub_account, form), 400
    try:
        connection = commit_or_show(
            form, lambda: connect_calendar(sub_account, form.document()), FIELDS
        )
    except Refused:
        return _list_page(sub_account, form)
    flash(
        f"Connection “{connection.name}” added. Test it to check the server and choose its"
        " calendar, or sync it now."
    )
    return redirect(_connection_url(connection))


def _list_page(sub_account: SubAccount, form: NewConnectionForm) -> str:
    return render_template(
        "dashboard/connections.html",
        sub_account=sub_account,
        connections=list_connections(sub_account.id),
        form=form,
    )


@dashboard.route("/s/<int:sub_account_id>/connections/<int:connection_id>", methods=["GET", "POST"])
def connection(sub_account_id: int, connection_id: int) -> str | Response | tuple[str, int]:
    """A connection's health and its settings (POST saves them)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    form = EditConnectionForm(obj=found)
    if request.method == "GET":
        return _page(sub_account, found, form)
    if not form.validate_on_submit():
        return _page(sub_account, found, form), 400
    try:
        commit_or_show(
            form, lambda: update_connection(sub_account, found.id, form.document()), FIELDS
        )
    except Refused:
        return _page(sub_account, found, form)  # rolled back: as stored
    flash("Connection saved.")
    return redirect(_connection_url(found))


@dashboard.route("/s/<int:sub_account_id>/connections/<int:connection_id>/test", methods=["POST"])
def connection_test(sub_account_id: int, connection_id: int) -> str | Response:
    """Connect and list the account's calendars (stores nothing), on the connection's page."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    if not ActionForm().validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(_connection_url(found))
    calendars: list[CalendarChoice] | None = None
    error = None
    try:
        calendars = list_calendars(sub_account, found.id)
    except ServiceError as err:
        error = err.message
    form = EditConnectionForm(formdata=None, obj=found)
    return _page(sub_account, found, form, calendars=calendars, test_error=error)


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
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    if not ActionForm().validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(_connection_url(found))
    try:
        result = sync_now(sub_account, found.id, now=utcnow())
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not synced: {err.message}")
        return redirect(_connection_url(found))
    flash(_sync_outcome(result))
    return redirect(_connection_url(found))


def _sync_outcome(result: SyncResult) -> str:
    periods = f"{result.busy_count} busy period{'' if result.busy_count == 1 else 's'}"
    if result.status == "synced":
        return f"Synced: {periods} ({result.added} added, {result.removed} removed)."
    if result.status == "unchanged":
        return f"Synced: the calendar is unchanged, {periods}."
    if result.status == "skipped":
        return f"Not synced: {result.error}."
    then = (
        "The periodic sync will try again."
        if result.retryable
        else "Change the connection's settings, then sync again."
    )
    return f"Sync failed: {result.error}. The busy time read before stays. {then}"


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


def _page(
    sub_account: SubAccount,
    found: CalendarConnection,
    form: EditConnectionForm,
    *,
    calendars: list[CalendarChoice] | None = None,
    test_error: str | None = None,
) -> str:
    return render_template(
        "dashboard/connection.html",
        sub_account=sub_account,
        connection=found,
        form=form,
        action_form=ActionForm(),
        choose_form=ChooseCalendarForm(formdata=None),
        calendars=calendars,
        test_error=test_error,
    )
