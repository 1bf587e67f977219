"""The attendee's page: ``{PUBLIC_URL}/manage/<token>``, opened from the link in their mails
(or handed on by an agent, from the API's ``manageUrl``). No account: the signed token is the
key (``app.services.common.manage_links``). Phone first, no third-party assets, the dashboard's
strict CSP, a CSRF token on every form, and rate limits per link and per address
(``ATTENDEE_PAGE_LIMIT_PER_LINK``, ``ATTENDEE_PAGE_LIMIT_PER_ADDRESS``).

Times are shown in the attendee's timezone: the browser's (``attendee.js`` adds it as ``tz``
once), else the one the attendee booked in. What they may do is
``app.services.bookings.attendee_changes``'s to decide; these views parse, call one service and
render.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_limiter import RateLimitExceeded
from flask_wtf import FlaskForm
from wtforms import DateField, HiddenField, StringField, TextAreaField
from wtforms.validators import Length, Optional

from app.config import settings_of
from app.extensions import db
from app.models.limits import REASON_MAX
from app.models.types import utcnow
from app.scheduling.timezones import InvalidInstant, is_timezone, read_instant, zone
from app.services.bookings.attendee_changes import (
    DAYS_SHOWN,
    AttendeeBooking,
    cancel_as_attendee,
    hold_choice,
    move_as_attendee,
    open_attendee_booking,
    open_slots_for_attendee,
)
from app.services.bookings.planned import PlannedWrite
from app.services.common.errors import InvalidRequest, TimeUnavailable
from app.services.common.manage_links import LinkProblem, ManageLinkUnusable
from app.unit_of_work import perform

attendee = Blueprint("attendee", __name__, url_prefix="/manage")

FORM_EXPIRED = "The form had expired. Please try again."


class CancelForm(FlaskForm):
    reason = TextAreaField("Reason (optional)", validators=[Optional(), Length(max=REASON_MAX)])


class ChoiceForm(FlaskForm):
    start = HiddenField()


class ConfirmForm(FlaskForm):
    start = HiddenField()
    hold = HiddenField()


class WeekForm(FlaskForm):
    """Which days of slots to show and in which timezone: a GET form, so no CSRF token."""

    class Meta:
        csrf = False

    day = DateField("From", validators=[Optional()])
    tz = StringField(validators=[Optional()])


def _shown_timezone(shown: AttendeeBooking) -> str:
    """The browser's timezone when the page was told it (``tz``), else the attendee's."""
    asked = request.args.get("tz", "")
    return asked if is_timezone(asked) else shown.link.attendee.timezone


@attendee.after_request
def _kept_nowhere(response: Response) -> Response:
    """Every answer under a manage link is that attendee's booking, opened by a secret in the
    address: no browser or proxy cache keeps it (a shared computer's history shows the page
    only by asking the server again)."""
    response.headers["Cache-Control"] = "no-store"
    return response


@attendee.errorhandler(ManageLinkUnusable)
def _unusable(err: ManageLinkUnusable) -> tuple[str, int]:
    """A link that opens nothing, on any of the pages: it says why (forged 404, else 410)."""
    status = 404 if err.problem is LinkProblem.FORGED else 410
    return render_template("attendee/unusable.html", message=err.problem.value), status


def _chosen_start(text: str | None) -> datetime:
    """The start a slot's button sent: an instant with its offset, as the page wrote it."""
    value = read_instant(text or "").value
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInstant("expected a time with its offset")
    return value


def _page_url(token: str, tz: str) -> str:
    return url_for("attendee.page", token=token, tz=tz)


@attendee.route("/<token>")
def page(token: str) -> Any:
    shown = open_attendee_booking(token, utcnow())
    return render_template(
        "attendee/booking.html",
        shown=shown,
        booking=shown.booking,
        token=token,
        tz=_shown_timezone(shown),
        cancel_form=CancelForm(),
    )


@attendee.route("/<token>/cancel", methods=["POST"])
def cancel(token: str) -> Any:
    form = CancelForm()
    now = utcnow()
    shown = open_attendee_booking(token, now)
    back = _page_url(token, _shown_timezone(shown))
    if not form.validate_on_submit():
        flash(FORM_EXPIRED if "csrf_token" in form.errors else "The reason is too long.")
        return redirect(back)
    try:
        cancel_as_attendee(shown, (form.reason.data or "").strip() or None, now)
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not cancelled: {err.message}")
        return redirect(back)
    flash("Your booking is cancelled. A confirmation is on its way to you.")
    return redirect(back)


@attendee.route("/<token>/reschedule")
def reschedule(token: str) -> Any:
    now = utcnow()
    return _slots_page(token, open_attendee_booking(token, now), now)


def _slots_page(
    token: str,
    shown: AttendeeBooking,
    now: datetime,
    *,
    problem: str | None = None,
    suggested: list[Any] | None = None,
    status: int = 200,
) -> tuple[str, int]:
    tz = _shown_timezone(shown)
    week = WeekForm(request.args)
    today = now.astimezone(zone(tz)).date()
    first = week.day.data if week.validate() and week.day.data else None
    if first is None:  # from the booking's own day: a move is most often a near one
        first = shown.booking.start_at.astimezone(zone(tz)).date()
    first = min(max(first, today), date(9000, 1, 1))
    days: list[Any] = []
    if shown.can_move:
        try:
            days = open_slots_for_attendee(shown, first, tz, now)
        except InvalidRequest as err:  # e.g. the event type was deactivated
            problem = problem or err.message
    return (
        render_template(
            "attendee/reschedule.html",
            shown=shown,
            booking=shown.booking,
            token=token,
            tz=tz,
            days=days,
            problem=problem,
            suggested=suggested or [],
            earlier=first - timedelta(days=DAYS_SHOWN) if first > today else None,
            later=first + timedelta(days=DAYS_SHOWN),
            choice_form=ChoiceForm(),
        ),
        status,
    )


TAKEN_MEANWHILE = "That time was just taken. These are the nearest open times."


@dataclass(frozen=True)
class _Stepped:
    """A step of the move that went through: the booking as opened, the start, what it gave."""

    shown: AttendeeBooking
    start: datetime
    result: Any


def _moving_step(
    token: str,
    form: ChoiceForm | ConfirmForm,
    step: Callable[[AttendeeBooking, datetime, datetime], PlannedWrite[Any]],
) -> Any:
    """A POST of the move (the choice, then the confirmation) run alike: the link opened, the
    form's token checked, ``step(shown, start, now)`` planned and performed (``_Stepped``), or the
    answer to give instead: the slots again with the nearest open ones when the time was just
    taken (409), else back to the slots saying why."""
    now = utcnow()
    shown = open_attendee_booking(token, now)
    back = url_for("attendee.reschedule", token=token, tz=_shown_timezone(shown))
    if not form.validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(back)
    try:
        start = _chosen_start(form.start.data)
        result = perform(step(shown, start, now))
    except TimeUnavailable as err:
        db.session.rollback()
        return _slots_page(
            token, shown, now, problem=TAKEN_MEANWHILE, suggested=err.suggested_slots, status=409
        )
    except (InvalidRequest, InvalidInstant) as err:
        db.session.rollback()
        flash(f"Not moved: {getattr(err, 'message', err)}")
        return redirect(back)
    return _Stepped(shown, start, result)


@attendee.route("/<token>/reschedule", methods=["POST"])
def choose(token: str) -> Any:
    """The attendee picked a slot: hold it and ask them to confirm."""
    done = _moving_step(token, ChoiceForm(), hold_choice)
    if not isinstance(done, _Stepped):
        return done
    shown, start, placed = done.shown, done.start, done.result
    confirm_form = ConfirmForm(
        formdata=None, start=start.isoformat(), hold=placed.token if placed else ""
    )
    return render_template(
        "attendee/confirm.html",
        shown=shown,
        booking=shown.booking,
        token=token,
        tz=_shown_timezone(shown),
        start=start,
        end=start + (shown.booking.end_at - shown.booking.start_at),
        held_until=placed.hold.expires_at if placed else None,
        confirm_form=confirm_form,
    )


@attendee.route("/<token>/reschedule/confirm", methods=["POST"])
def confirm(token: str) -> Any:
    form = ConfirmForm()
    done = _moving_step(
        token,
        form,
        lambda shown, start, now: move_as_attendee(shown, start, form.hold.data or None, now),
    )
    if not isinstance(done, _Stepped):
        return done
    flash("Your booking has moved. A new invitation is on its way to you.")
    return redirect(_page_url(token, _shown_timezone(done.shown)))


@attendee.errorhandler(RateLimitExceeded)
def _too_many(error: RateLimitExceeded) -> tuple[str, int]:
    return render_template("attendee/too_many.html"), 429


def register_attendee_pages(app: Flask, limiter: Any) -> None:
    """The attendee's pages, limited per link and per client address: one count across all
    of the pages (shared limits), so a link's page, its slots, a choice, a confirmation and a
    cancel all draw on the same allowance."""
    configured = settings_of(app)
    per_link, per_address = (
        configured.attendee_page_limit_per_link,
        configured.attendee_page_limit_per_address,
    )
    limiter.shared_limit(
        lambda: per_link,
        scope="attendee-pages-per-link",
        key_func=lambda: f"manage-link:{(request.view_args or {}).get('token', '')}",
    )(attendee)
    limiter.shared_limit(
        lambda: per_address,
        scope="attendee-pages-per-address",
        key_func=lambda: f"manage-address:{request.remote_addr}",
    )(attendee)
    app.register_blueprint(attendee)
