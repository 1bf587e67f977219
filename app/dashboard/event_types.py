"""Event types: the list (offered and deactivated, each with the ``eventTypeId`` agents book
it by), a new one, editing one, and deactivating or reactivating it, through
``app.services.availability.event_types``."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from werkzeug.wrappers import Response

from app.dashboard.changes import Page, press_button, save_form
from app.dashboard.event_type_forms import FIELDS, EventTypeForm
from app.dashboard.forms import ActionForm
from app.dashboard.views import dashboard
from app.models import EventType, SubAccount
from app.services.accounts.users import open_sub_account
from app.services.availability.event_types import (
    create_event_type,
    list_event_types,
    set_event_type_offered,
    update_event_type,
)
from app.services.availability.hosts import hosts_of
from app.services.availability.profiles import list_profiles
from app.services.scheduling_inputs import get_event_type


@dashboard.route("/s/<int:sub_account_id>/event-types")
def event_types(sub_account_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    found = list_event_types(sub_account)
    return render_template(
        "dashboard/event_types.html",
        sub_account=sub_account,
        offered=[et for et in found if et.active],
        deactivated=[et for et in found if not et.active],
        button=ActionForm(),
    )


@dashboard.route("/s/<int:sub_account_id>/event-types/new", methods=["GET", "POST"])
def new_event_type(sub_account_id: int) -> Page:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = EventTypeForm()
    form.offer_hosts(hosts_of(sub_account.id), [])
    if request.method == "GET":
        form.duration.data = sub_account.settings.default_duration
        form.show_questions([])
        return _form_page(sub_account, form)
    created, answer = save_form(
        form,
        lambda: create_event_type(sub_account, form.document()),
        lambda: _form_page(sub_account, form),
        FIELDS,
    )
    if answer is not None:
        return answer
    flash(f"Created {created.name}. Agents book it with eventTypeId {created.id}.")
    return redirect(url_for("dashboard.event_types", sub_account_id=sub_account.id))


@dashboard.route("/s/<int:sub_account_id>/event-types/<int:event_type_id>", methods=["GET", "POST"])
def edit_event_type(sub_account_id: int, event_type_id: int) -> Page:
    sub_account = open_sub_account(current_user, sub_account_id)
    event_type = get_event_type(sub_account, event_type_id, offered_only=False)
    form = EventTypeForm(obj=event_type)
    form.offer_hosts(hosts_of(sub_account.id), event_type.hosts)
    if request.method == "GET":
        form.show_reminders(event_type.reminders)
        form.show_questions(event_type.questions)
        return _form_page(sub_account, form, event_type)
    _, answer = save_form(
        form,
        lambda: update_event_type(
            sub_account,
            event_type.id,
            form.document(had_own_reminders=event_type.reminders is not None),
        ),
        lambda: _form_page(sub_account, form, event_type),
        FIELDS,
    )
    if answer is not None:
        return answer
    flash(f"Saved {event_type.name}.")
    return redirect(url_for("dashboard.event_types", sub_account_id=sub_account.id))


@dashboard.route(
    "/s/<int:sub_account_id>/event-types/<int:event_type_id>/<any(deactivate, reactivate):change>",
    methods=["POST"],
)
def change_event_type_offer(sub_account_id: int, event_type_id: int, change: str) -> Response:
    """Deactivate (no longer offered; its bookings live on) or reactivate an event type."""
    sub_account = open_sub_account(current_user, sub_account_id)
    event_type = get_event_type(sub_account, event_type_id, offered_only=False)
    offered = change == "reactivate"
    done = (
        f"{event_type.name} is offered again."
        if offered
        else f"{event_type.name} is deactivated: agents can no longer book it; its bookings stay."
    )
    press_button(
        ActionForm(), lambda: set_event_type_offered(sub_account, event_type.id, offered), done
    )
    return redirect(url_for("dashboard.event_types", sub_account_id=sub_account.id))


def _form_page(
    sub_account: SubAccount, form: EventTypeForm, event_type: EventType | None = None
) -> str:
    form.offer_profiles(list_profiles(sub_account))
    form.offer_hosts(hosts_of(sub_account.id), event_type.hosts if event_type else [])
    return render_template(
        "dashboard/event_type.html",
        sub_account=sub_account,
        form=form,
        event_type=event_type,
        button=ActionForm(),
    )
