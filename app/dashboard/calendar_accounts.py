"""Connecting the calendars people keep, from the Connections page: Google and Microsoft 365
through the provider's consent page, then choosing the account's calendars; a calendar feed by
its address; and CalDAV presets for iCloud, Fastmail and Nextcloud (the CalDAV form with the
server filled in and the right kind of password explained).

Between "Connect" and the provider's redirect to ``{PUBLIC_URL}/oauth/<kind>/callback`` the
consent waits on the server (``consent.begin_consent``: the PKCE verifier, encrypted, and the
sub account, by the state's digest); the person's session (signed, HttpOnly) only lists the
states begun in this browser. The callback accepts a state that is both in this browser's
session and unused on the server, begun by the person signed in, and marks it used before the
code is exchanged: a replayed callback, old cookie and all, exchanges nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import BooleanField, RadioField, SelectMultipleField, StringField, URLField
from wtforms.widgets import CheckboxInput, ListWidget

from app.dashboard.changes import Refused, commit_or_show
from app.dashboard.forms import FORM_EXPIRED, ActionForm
from app.dashboard.views import dashboard
from app.extensions import db
from app.links import public_link
from app.models import ConnectionKind
from app.models.calendar_connection import OAUTH_KINDS
from app.models.types import utcnow
from app.services.accounts.users import open_sub_account
from app.services.common.errors import InvalidRequest
from app.services.integrations.calendars.connections import find_connection
from app.services.integrations.calendars.consent import (
    begin_consent,
    calendar_options,
    choose_calendars,
    finish_consent,
    take_consent,
)

oauth = Blueprint("oauth", __name__, url_prefix="/oauth")

# What each kind of connection is called on the pages.
KIND_LABELS = {
    ConnectionKind.CALDAV: "CalDAV",
    ConnectionKind.GOOGLE: "Google Calendar",
    ConnectionKind.MICROSOFT: "Microsoft 365",
    ConnectionKind.ICS: "Calendar feed",
}

_CONSENTS = "calendar_consent_states"  # the states of the consents begun in this browser
_KEPT_CONSENTS = 3


@dataclass(frozen=True)
class CalDAVPreset:
    """A CalDAV service people know by name: its server, and what to enter as its password."""

    key: str
    label: str
    url: str
    username_hint: str
    password_hint: str


CALDAV_PRESETS = {
    preset.key: preset
    for preset in (
        CalDAVPreset(
            "icloud",
            "iCloud",
            "https://caldav.icloud.com/",
            "your Apple Account email",
            "an app-specific password, not your Apple Account password: make one at "
            "account.apple.com → Sign-In and Security → App-Specific Passwords",
        ),
        CalDAVPreset(
            "fastmail",
            "Fastmail",
            "https://caldav.fastmail.com/dav/",
            "your Fastmail address",
            "an app password with CalDAV access: Settings → Privacy & Security → "
            "Manage app passwords and access → New app password",
        ),
        CalDAVPreset(
            "nextcloud",
            "Nextcloud",
            "https://",
            "your Nextcloud user name",
            "an app password: Personal settings → Security → Devices & sessions → Create new "
            "app password. The URL is your server's address followed by /remote.php/dav/",
        ),
    )
}


class FeedForm(FlaskForm):
    feed_name = StringField("Name")
    feed_url = URLField("The calendar's secret address in iCal format (webcal:// or https://)")

    def document(self) -> dict:
        return {
            "name": (self.feed_name.data or "").strip(),
            "kind": ConnectionKind.ICS,
            "url": (self.feed_url.data or "").strip(),
        }


class ChooseCalendarsForm(FlaskForm):
    calendars = SelectMultipleField(
        "Check these calendars for conflicts",
        choices=[],
        validate_choice=False,
        option_widget=CheckboxInput(),
        widget=ListWidget(prefix_label=False),
    )
    write_calendar = RadioField("Write bookings into", choices=[], validate_choice=False)
    write_back = BooleanField("Write bookings into the calendar chosen below")


@dashboard.context_processor
def _kind_labels() -> dict:
    return {"kind_labels": KIND_LABELS}


@dashboard.route("/s/<int:sub_account_id>/connections/connect/<kind>", methods=["POST"])
def connect_account(sub_account_id: int, kind: str) -> Response:
    """Send the person to the provider's consent page (or say what the operator must set)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    back = redirect(url_for("dashboard.connections", sub_account_id=sub_account.id))
    if kind not in OAUTH_KINDS:
        return back
    if not ActionForm().validate_on_submit():
        flash(FORM_EXPIRED)
        return back
    try:
        consent = begin_consent(
            kind,
            public_link("oauth.callback", kind=kind),
            sub_account=sub_account,
            user_id=current_user.id,
            now=utcnow(),
        )
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(err.message)
        return back
    session[_CONSENTS] = [*session.get(_CONSENTS, [])[-(_KEPT_CONSENTS - 1) :], consent.state]
    return redirect(consent.url)


@oauth.route("/<kind>/callback")
@login_required
def callback(kind: str) -> Response:
    """Where the provider sends the person back: a code becomes a connection, then the
    person chooses its calendars; a refusal says so."""
    state = request.args.get("state", "")
    begun = session.get(_CONSENTS, [])
    waiting = None
    if isinstance(begun, list) and state in begun:
        session[_CONSENTS] = [s for s in begun if s != state]
        waiting = take_consent(state, kind, user_id=current_user.id, now=utcnow())
        db.session.commit()  # used, whatever comes of the code
    if waiting is None:
        flash("That connection attempt has expired or did not start here. Please try again.")
        return redirect(url_for("dashboard.home"))
    sub_account = open_sub_account(current_user, waiting.sub_account_id)
    back = redirect(url_for("dashboard.connections", sub_account_id=sub_account.id))
    if "code" not in request.args:
        refused = request.args.get("error", "no code")
        flash(f"Not connected: access was not allowed ({refused}).")
        return back
    try:
        connection = finish_consent(
            sub_account,
            kind,
            public_link("oauth.callback", kind=kind),
            request.args["code"],
            waiting.code_verifier,
        )
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not connected: {err.message}")
        return back
    flash(
        f"Connected “{connection.name}”. Choose the calendars to check for conflicts and the"
        " one bookings are written into."
    )
    return redirect(
        url_for(
            "dashboard.connection_calendars",
            sub_account_id=sub_account.id,
            connection_id=connection.id,
        )
    )


@dashboard.route(
    "/s/<int:sub_account_id>/connections/<int:connection_id>/calendars", methods=["GET", "POST"]
)
def connection_calendars(sub_account_id: int, connection_id: int) -> str | Response:
    """Choose a Google or Microsoft account's calendars; saving syncs at once, so the page
    that follows already shows their busy time."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = find_connection(sub_account, connection_id)
    connection_page = url_for(
        "dashboard.connection", sub_account_id=sub_account.id, connection_id=found.id
    )
    if found.kind not in OAUTH_KINDS:
        return redirect(connection_page)
    try:
        options = calendar_options(sub_account, found.id)
    except InvalidRequest as err:
        flash(f"The calendars cannot be listed: {err.message}")
        return redirect(connection_page)
    form = ChooseCalendarsForm()
    form.calendars.choices = [(o.remote_id, o.name) for o in options]
    form.write_calendar.choices = [(o.remote_id, o.name) for o in options if o.writable]
    if request.method == "GET":
        form.calendars.data = [o.remote_id for o in options if o.checked]
        form.write_calendar.data = next((o.remote_id for o in options if o.write_into), None)
        form.write_back.data = found.write_back
        return _calendars_page(sub_account, found, form)
    if not form.validate_on_submit():
        return _calendars_page(sub_account, found, form)
    try:
        commit_or_show(
            form,
            lambda: choose_calendars(
                sub_account,
                found.id,
                form.calendars.data or [],
                form.write_calendar.data,
                form.write_back.data,
            ),
            {"calendars": "calendars", "writeCalendar": "write_calendar"},
        )
    except Refused:
        return _calendars_page(sub_account, found, form)
    flash("Calendars saved: reading them now.")  # choose_calendars asked the worker to
    return redirect(connection_page)


def _calendars_page(sub_account, connection, form: ChooseCalendarsForm) -> str:
    return render_template(
        "dashboard/connection_calendars.html",
        sub_account=sub_account,
        connection=connection,
        form=form,
    )
