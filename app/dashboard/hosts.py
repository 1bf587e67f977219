"""Hosts: the people (or rooms) a sub account's bookings are made with. The list, adding and
editing one (name, email for their notifications, working hours, timezone), and deactivating
one, which asks what becomes of the bookings still to come when there are any
(``app.services.bookings.host_leave``), or making one active again."""

from __future__ import annotations

from typing import Any

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import RadioField, SelectField, StringField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import InputRequired

from app.dashboard.changes import Page, press_button, save_form
from app.dashboard.event_type_forms import optional_id
from app.dashboard.forms import ActionForm
from app.dashboard.views import dashboard
from app.models import Host, SubAccount
from app.models.types import utcnow
from app.services.accounts.users import open_sub_account
from app.services.availability.hosts import (
    create_host,
    get_host,
    hosts_of,
    set_host_active,
    update_host,
)
from app.services.availability.profiles import list_profiles
from app.services.bookings.host_leave import (
    FutureBookings,
    deactivate_host,
    future_bookings_count,
)

# Service document field → form field.
FIELDS = {
    "name": "name",
    "email": "email",
    "timezone": "timezone",
    "availabilityProfileId": "availability_profile_id",
}


class HostForm(FlaskForm):
    # Field names are the model's, so a host fills the form (``obj=``).
    name = StringField("Name", validators=[InputRequired("Enter a name.")])
    email = StringField("Email for their notifications (optional)")
    timezone = StringField("Timezone (optional; empty: the calendar's)")
    availability_profile_id = SelectField(
        "Working hours", coerce=optional_id, validate_choice=False
    )

    def offer_profiles(self, sub_account: SubAccount) -> None:
        profiles = list_profiles(sub_account)
        default = next((p.name for p in profiles if p.is_default), None)
        label = f"The default profile ({default})" if default else "The default profile"
        self.availability_profile_id.choices = [
            SelectChoice("", label),
            *(SelectChoice(str(p.id), p.name) for p in profiles),
        ]

    def document(self) -> dict[str, Any]:
        return {
            "name": (self.name.data or "").strip(),
            "email": (self.email.data or "").strip() or None,
            "timezone": (self.timezone.data or "").strip() or None,
            "availabilityProfileId": self.availability_profile_id.data,
        }


class LeaveForm(FlaskForm):
    future = RadioField(
        "Their bookings still to come",
        choices=[
            SelectChoice(
                FutureBookings.KEEP.value, "Keep them: the host still comes, or move each one"
            ),
            SelectChoice(FutureBookings.CANCEL.value, "Cancel them: the attendees are told"),
        ],
        validators=[InputRequired("Choose what becomes of them.")],
    )


@dashboard.route("/s/<int:sub_account_id>/hosts")
def hosts(sub_account_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    found = hosts_of(sub_account.id)
    return render_template(
        "dashboard/hosts.html",
        sub_account=sub_account,
        active=[h for h in found if h.active],
        deactivated=[h for h in found if not h.active],
        profiles={p.id: p.name for p in list_profiles(sub_account)},
        button=ActionForm(),
    )


@dashboard.route("/s/<int:sub_account_id>/hosts/new", methods=["GET", "POST"])
def new_host(sub_account_id: int) -> Page:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = HostForm()
    if request.method == "GET":
        return _form_page(sub_account, form)
    created, answer = save_form(
        form,
        lambda: create_host(sub_account, form.document()),
        lambda: _form_page(sub_account, form),
        FIELDS,
    )
    if answer is not None:
        return answer
    flash(f"Added {created.name}. Add them to event types to have them booked.")
    return redirect(url_for("dashboard.hosts", sub_account_id=sub_account.id))


@dashboard.route("/s/<int:sub_account_id>/hosts/<int:host_id>", methods=["GET", "POST"])
def edit_host(sub_account_id: int, host_id: int) -> Page:
    sub_account = open_sub_account(current_user, sub_account_id)
    host = get_host(sub_account, host_id)
    form = HostForm(obj=host)
    if request.method == "GET":
        return _form_page(sub_account, form, host)
    _, answer = save_form(
        form,
        lambda: update_host(sub_account, host.id, form.document()),
        lambda: _form_page(sub_account, form, host),
        FIELDS,
    )
    if answer is not None:
        return answer
    flash(f"Saved {host.name}.")
    return redirect(url_for("dashboard.hosts", sub_account_id=sub_account.id))


@dashboard.route("/s/<int:sub_account_id>/hosts/<int:host_id>/deactivate", methods=["GET", "POST"])
def deactivate_host_page(sub_account_id: int, host_id: int) -> Page:
    """Deactivate a host: with bookings still to come, only once the person chose what becomes
    of them."""
    sub_account = open_sub_account(current_user, sub_account_id)
    host = get_host(sub_account, host_id)
    now = utcnow()
    upcoming = future_bookings_count(sub_account, host.id, now)
    form = LeaveForm()
    if upcoming == 0:
        form.future.data = FutureBookings.KEEP.value
    if request.method == "GET":
        return _leave_page(sub_account, host, upcoming, form)
    cancelled, answer = save_form(
        form,
        lambda: deactivate_host(sub_account, host.id, FutureBookings(form.future.data), now=now),
        lambda: _leave_page(sub_account, host, upcoming, form),
    )
    if answer is not None:
        return answer
    flash(
        f"{host.name} is deactivated"
        + (f"; {cancelled} of their bookings were cancelled." if cancelled else ".")
    )
    return redirect(url_for("dashboard.hosts", sub_account_id=sub_account.id))


@dashboard.route("/s/<int:sub_account_id>/hosts/<int:host_id>/reactivate", methods=["POST"])
def reactivate_host(sub_account_id: int, host_id: int) -> Response:
    sub_account = open_sub_account(current_user, sub_account_id)
    host = get_host(sub_account, host_id)
    press_button(
        ActionForm(),
        lambda: set_host_active(sub_account, host.id, True),
        f"{host.name} is active again.",
    )
    return redirect(url_for("dashboard.hosts", sub_account_id=sub_account.id))


def _form_page(sub_account: SubAccount, form: HostForm, host: Host | None = None) -> str:
    form.offer_profiles(sub_account)
    return render_template("dashboard/host.html", sub_account=sub_account, form=form, host=host)


def _leave_page(sub_account: SubAccount, host: Host, upcoming: int, form: LeaveForm) -> str:
    return render_template(
        "dashboard/host_deactivate.html",
        sub_account=sub_account,
        host=host,
        upcoming=upcoming,
        form=form,
    )
