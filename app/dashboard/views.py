"""The dashboard's pages for a chosen sub account."""

from __future__ import annotations

from flask import Blueprint, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from werkzeug.wrappers import Response

from app.dashboard.areas import areas_for
from app.dashboard.auth import page_forms
from app.models.types import utcnow
from app.scheduling.timezones import InstantInput
from app.services.accounts.users import open_sub_account, visible_sub_accounts
from app.services.bookings.queries import BookingListQuery, list_bookings
from app.services.common.errors import NotFound

dashboard = Blueprint("dashboard", __name__, url_prefix="/dashboard")


@dashboard.before_request
@login_required
def _signed_in() -> None:
    """Every dashboard page needs a signed-in user."""


@dashboard.errorhandler(NotFound)
def _not_found(error: NotFound) -> tuple[str, int]:
    return render_template("dashboard/not_found.html", message=error.message), 404


@dashboard.errorhandler(403)
def _forbidden(error: Exception) -> tuple[str, int]:
    return render_template("dashboard/forbidden.html"), 403


dashboard.context_processor(page_forms)


@dashboard.context_processor
def _menus() -> dict:
    return {"switcher": visible_sub_accounts(current_user), "areas": areas_for(current_user)}


@dashboard.route("/")
def home() -> str | Response:
    """The sub account chosen in the switcher (``?s=ID``), the only one the user may open, or
    the list of them."""
    chosen = request.args.get("s", "")
    if chosen.isdigit():
        sub_account = open_sub_account(current_user, int(chosen))
        return redirect(url_for("dashboard.overview", sub_account_id=sub_account.id))
    sub_accounts = visible_sub_accounts(current_user)
    if len(sub_accounts) == 1:
        return redirect(url_for("dashboard.overview", sub_account_id=sub_accounts[0].id))
    return render_template("dashboard/home.html", sub_accounts=sub_accounts)


@dashboard.route("/s/<int:sub_account_id>/")
def overview(sub_account_id: int) -> str:
    """The sub account at a glance: its upcoming bookings, the active ones (pending and
    confirmed) unless ``?cancelled=1`` asks for every one, cancelled included."""
    sub_account = open_sub_account(current_user, sub_account_id)
    with_cancelled = request.args.get("cancelled") == "1"
    upcoming, total = list_bookings(
        sub_account,
        BookingListQuery(
            start_date=InstantInput(utcnow()), active_only=not with_cancelled, limit=20, offset=0
        ),
    )
    return render_template(
        "dashboard/overview.html",
        sub_account=sub_account,
        upcoming=upcoming,
        total=total,
        with_cancelled=with_cancelled,
    )
