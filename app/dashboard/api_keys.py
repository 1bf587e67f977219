"""Calendar API keys, for agency owners only (the spec: "a key is created in the dashboard by
an agency owner"): make one with a name, an optional expiry and some of the four permissions,
see its plain key once, list the sub account's keys, deactivate, reactivate and delete them.
The rules are ``app.services.accounts.api_keys``'s; the API reads a key's state on every
request, so a change here holds from the next call."""

from __future__ import annotations

from flask import redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import HiddenField, StringField
from wtforms.fields.choices import SelectChoice

from app.dashboard.areas import owners_only
from app.dashboard.changes import Page, press_button
from app.dashboard.forms import MultiCheckboxField
from app.dashboard.show_once import issue_ticket, save_secret_form, show_secret
from app.dashboard.views import dashboard
from app.models import SubAccount
from app.models.limits import NAME_MAX
from app.models.types import utcnow
from app.services.accounts.agent_access import revoke_connection
from app.services.accounts.api_keys import (
    PERMISSION_LABELS,
    create_api_key,
    deactivate_key,
    delete_key,
    get_key,
    key_status,
    list_grants,
    list_keys,
    reactivate_key,
)
from app.services.accounts.users import open_sub_account


class NewApiKeyForm(FlaskForm):
    # Lengths and formats are the service's rules; the form carries what was typed.
    ticket = HiddenField()
    name = StringField("Name", render_kw={"maxlength": NAME_MAX, "autocomplete": "off"})
    expires_at = StringField("Expires (optional)", render_kw={"autocomplete": "off"})
    permissions = MultiCheckboxField(
        "Permissions",
        choices=[SelectChoice(value, label) for value, label in PERMISSION_LABELS.items()],
        validate_choice=False,
    )


class KeyActionForm(FlaskForm):
    """A button that changes a key: only the CSRF token."""


def _keys_url(sub_account: SubAccount) -> str:
    return url_for("dashboard.api_keys", sub_account_id=sub_account.id)


@dashboard.route("/s/<int:sub_account_id>/api-keys", methods=["GET", "POST"])
@owners_only
def api_keys(sub_account_id: int) -> Page:
    """The keys and the form for a new one; a new key's page answers the POST itself, so its
    plain key is in that one answer and nowhere else."""
    sub_account = open_sub_account(current_user, sub_account_id)
    form = NewApiKeyForm()
    if request.method == "GET":
        form.ticket.data = issue_ticket()
        return _list_page(sub_account, form)
    made, answer = save_secret_form(
        form,
        lambda: create_api_key(
            sub_account,
            name=form.name.data,
            permissions=form.permissions.data or [],
            expires_at=form.expires_at.data,
            now=utcnow(),
            created_by_user_id=current_user.id,
        ),
        lambda: _list_page(sub_account, form),
        {"expiresAt": "expires_at"},
        resent=(
            _keys_url(sub_account),
            "That form was already sent: its key is listed below and is not shown again.",
        ),
    )
    if answer is not None:
        return answer
    api_key, plain = made
    return show_secret(
        form.ticket.data,
        "dashboard/api_key_created.html",
        sub_account=sub_account,
        api_key=api_key,
        plain_key=plain,
        labels=PERMISSION_LABELS,
    )


def _list_page(sub_account: SubAccount, form: NewApiKeyForm) -> str:
    timezone = sub_account.settings.timezone
    form.expires_at.label.text = f"Expires (optional, {timezone} time)"
    now = utcnow()
    return render_template(
        "dashboard/api_keys.html",
        sub_account=sub_account,
        form=form,
        keys=[(key, key_status(key, now)) for key in list_keys(sub_account)],
        grants=[(grant, key_status(grant, now)) for grant in list_grants(sub_account)],
        labels=PERMISSION_LABELS,
        action_form=KeyActionForm(),
    )


@dashboard.route("/s/<int:sub_account_id>/api-keys/<int:key_id>/deactivate", methods=["POST"])
@owners_only
def api_key_deactivate(sub_account_id: int, key_id: int) -> Response:
    return _change(sub_account_id, key_id, deactivate_key, "deactivated: the API refuses it now")


@dashboard.route("/s/<int:sub_account_id>/api-keys/<int:key_id>/revoke", methods=["POST"])
@owners_only
def agent_connection_revoke(sub_account_id: int, key_id: int) -> Response:
    """An agent's OAuth connection ends: its tokens are refused from the next request."""
    sub_account = open_sub_account(current_user, sub_account_id)
    grant = get_key(sub_account, key_id)  # another sub account's: 404
    press_button(
        KeyActionForm(),
        lambda: revoke_connection(sub_account, grant.id, utcnow()),
        f"“{grant.name}” is disconnected: its tokens are refused from now on.",
    )
    return redirect(_keys_url(sub_account))


@dashboard.route("/s/<int:sub_account_id>/api-keys/<int:key_id>/reactivate", methods=["POST"])
@owners_only
def api_key_reactivate(sub_account_id: int, key_id: int) -> Response:
    return _change(sub_account_id, key_id, reactivate_key, "reactivated")


def _change(sub_account_id: int, key_id: int, action, done: str) -> Response:
    """Check the sub account and the key, then run ``action`` as a button's change."""
    sub_account = open_sub_account(current_user, sub_account_id)
    api_key = get_key(sub_account, key_id)  # another sub account's key: 404
    press_button(
        KeyActionForm(),
        lambda: action(sub_account, api_key.id),
        f"API key “{api_key.name}” {done}.",
    )
    return redirect(_keys_url(sub_account))


@dashboard.route("/s/<int:sub_account_id>/api-keys/<int:key_id>/delete", methods=["GET", "POST"])
@owners_only
def api_key_delete(sub_account_id: int, key_id: int) -> str | Response:
    """Asks first (GET), deletes on the confirmation's POST."""
    sub_account = open_sub_account(current_user, sub_account_id)
    api_key = get_key(sub_account, key_id)
    form = KeyActionForm()
    if request.method == "GET":
        return render_template(
            "dashboard/api_key_delete.html", sub_account=sub_account, api_key=api_key, form=form
        )
    press_button(
        form,
        lambda: delete_key(sub_account, api_key.id),
        f"API key “{api_key.name}” deleted: the API refuses it now.",
    )
    return redirect(_keys_url(sub_account))
