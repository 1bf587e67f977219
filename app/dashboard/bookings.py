"""The bookings list and a booking's page, with what a person may do to a booking: confirm it,
cancel it with a reason, and mark it completed or no-show once it has started. Each action is
the same service call the API and the worker make, under the same rules."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from werkzeug.wrappers import Response
from wtforms.fields.choices import SelectChoice

from app.dashboard.forms import FORM_EXPIRED, ActionForm, BookingFilterForm, CancelForm, page_count
from app.dashboard.views import dashboard
from app.extensions import db
from app.models import Booking, BookingStatus, Host, HostAssignment, SubAccount
from app.models.types import utcnow
from app.scheduling.timezones import InstantInput
from app.services.accounts.users import open_sub_account
from app.services.availability.event_types import list_event_types
from app.services.availability.hosts import hosts_of
from app.services.bookings.lifecycle import (
    can_confirm,
    can_record_outcome,
    confirm_booking,
    is_active,
    record_outcome,
)
from app.services.bookings.queries import (
    BookingListQuery,
    booking_history,
    get_booking,
    list_bookings,
)
from app.services.bookings.reminders import reminder_plan
from app.services.bookings.writes import BookingChanges, cancel_booking, update_booking
from app.services.common.answers import answer_lines
from app.services.common.errors import InvalidRequest
from app.services.common.ids import is_storable_id
from app.services.common.manage_links import manage_url, reissue_manage_link
from app.services.integrations.events import Actor, BookingEventKind
from app.unit_of_work import perform

PAGE_SIZE = 25


@dashboard.route("/s/<int:sub_account_id>/bookings")
def bookings(sub_account_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = BookingFilterForm(request.args)
    form.event_type.choices = [
        SelectChoice("", "Any"),
        *(SelectChoice(str(et.id), et.name) for et in list_event_types(sub_account)),
    ]
    page, query = 1, BookingListQuery(limit=PAGE_SIZE)  # filters with errors: shown, not applied
    if form.validate():
        page = form.page.data or 1
        query = BookingListQuery(
            status=form.status.data or None,
            event_type_id=_event_type_id(form.event_type.data),
            start_date=InstantInput(form.start.data) if form.start.data else None,
            end_date=InstantInput(form.end.data) if form.end.data else None,
            email=(form.email.data or "").strip().lower() or None,
            limit=PAGE_SIZE,
            offset=(page - 1) * PAGE_SIZE,
        )
    found, total = list_bookings(sub_account, query)
    return render_template(
        "dashboard/bookings.html",
        sub_account=sub_account,
        form=form,
        bookings=found,
        total=total,
        page=page,
        pages=page_count(total, PAGE_SIZE),
    )


def _event_type_id(text: str | None) -> int | None:
    """The chosen event type's id; anything else (a hand-edited URL) matches no booking."""
    if not text:
        return None
    return int(text) if text.isdigit() and is_storable_id(int(text)) else 0


@dashboard.route("/s/<int:sub_account_id>/bookings/<int:booking_id>")
def booking(sub_account_id: int, booking_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    found = get_booking(sub_account, booking_id)
    history = booking_history(found)
    return render_template(
        "dashboard/booking.html",
        sub_account=sub_account,
        booking=found,
        history=history,
        cancelled_by_attendee=any(
            e.kind == BookingEventKind.CANCELLED and e.actor == Actor.ATTENDEE for e in history
        ),
        manage_links={a.id: manage_url(a) for a in found.attendees},
        answers=answer_lines(found.event_type.questions, found.responses or {}),
        other_hosts=_other_team_hosts(sub_account, found),
        reminders=reminder_plan(found, sub_account.settings),
        action_form=ActionForm(),
        cancel_form=CancelForm(),
        # Which actions to offer: the service's own rules, asked beforehand.
        active=is_active(found),
        can_confirm=can_confirm(found),
        can_record_outcome=can_record_outcome(found, utcnow()),
    )


def _other_team_hosts(sub_account: SubAccount, booking: Booking) -> list[Host]:
    """The active hosts of a round-robin booking's event type it could be moved to (none for
    other bookings)."""
    event_type = booking.event_type
    if event_type.assignment is not HostAssignment.ROUND_ROBIN:
        return []
    listed = {row.host_id for row in event_type.hosts}
    return [
        host
        for host in hosts_of(sub_account.id)
        if host.active and host.id in listed and host.id != booking.host_id
    ]


@dashboard.route("/s/<int:sub_account_id>/bookings/<int:booking_id>/reassign", methods=["POST"])
def reassign(sub_account_id: int, booking_id: int) -> Response:
    """Move a round-robin booking to another host of its event type, free at its time (the
    time rule, the live check and the lock as any update's)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = get_booking(sub_account, booking_id)
    back = url_for("dashboard.booking", sub_account_id=sub_account.id, booking_id=found.id)
    form = ActionForm()
    if not form.validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(back)
    try:
        host_id = int(request.form.get("host_id", ""))
        perform(
            update_booking(
                sub_account,
                found.event_type_id,
                found.id,
                BookingChanges(sent=frozenset({"host_id"}), host_id=host_id),
                now=utcnow(),
            )
        )
    except ValueError:
        flash("Not moved: choose a host.")
        return redirect(back)
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not moved: {err.message}.")
        return redirect(back)
    flash("Booking moved to another host.")
    return redirect(back)


@dashboard.route("/s/<int:sub_account_id>/bookings/<int:booking_id>/confirm", methods=["POST"])
def confirm(sub_account_id: int, booking_id: int) -> Response:
    return _act(sub_account_id, booking_id, ActionForm(), "Booking confirmed.", _confirm)


@dashboard.route("/s/<int:sub_account_id>/bookings/<int:booking_id>/cancel", methods=["POST"])
def cancel(sub_account_id: int, booking_id: int) -> Response:
    form = CancelForm()
    return _act(sub_account_id, booking_id, form, "Booking cancelled.", _cancel(form))


@dashboard.route(
    "/s/<int:sub_account_id>/bookings/<int:booking_id>/outcome/<any(completed, no_show):outcome>",
    methods=["POST"],
)
def outcome(sub_account_id: int, booking_id: int, outcome: str) -> Response:
    message = "Marked completed." if outcome == "completed" else "Marked no-show."
    return _act(sub_account_id, booking_id, ActionForm(), message, _outcome(outcome))


@dashboard.route(
    "/s/<int:sub_account_id>/bookings/<int:booking_id>/attendees/<int:attendee_id>/new-link",
    methods=["POST"],
)
def new_manage_link(sub_account_id: int, booking_id: int, attendee_id: int) -> Response:
    """Replace one attendee's manage link (one that leaked, say): the earlier stops working."""

    def run(sub_account, booking_id):
        reissue_manage_link(sub_account, booking_id, attendee_id)

    done = "A new link was made; the earlier one no longer works. Send the new one on."
    return _act(sub_account_id, booking_id, ActionForm(), done, run)


def _confirm(sub_account, booking_id):
    confirm_booking(sub_account, booking_id, now=utcnow())


def _cancel(form: CancelForm):
    def run(sub_account, booking_id):
        cancel_booking(sub_account, booking_id, form.reason.data or None, now=utcnow())

    return run


def _outcome(outcome: str):
    def run(sub_account, booking_id):
        record_outcome(sub_account, booking_id, BookingStatus(outcome), now=utcnow())

    return run


def _act(sub_account_id, booking_id, form, done: str, action) -> Response:
    """Check the sub account and the form's token, run ``action`` in one transaction, and say
    how it went on the booking's page."""
    sub_account = open_sub_account(current_user, sub_account_id)
    get_booking(sub_account, booking_id)  # another calendar's booking: 404
    page = url_for("dashboard.booking", sub_account_id=sub_account.id, booking_id=booking_id)
    if not form.validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(page)
    try:
        action(sub_account, booking_id)
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not done: {err.message}.")
        return redirect(page)
    flash(done)
    return redirect(page)
