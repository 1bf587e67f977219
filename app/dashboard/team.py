"""The agency's team, for its owner: new sub accounts, invited agency users and what each may
open; and the page where an invited user chooses a password through their one-time link."""

from __future__ import annotations

from flask import flash, make_response, redirect, render_template, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import EmailField, StringField

from app.dashboard.areas import owners_only
from app.dashboard.auth import auth, start_session
from app.dashboard.forms import (
    FORM_EXPIRED,
    ActionForm,
    MultiCheckboxField,
    password_field,
    show_errors,
)
from app.dashboard.views import dashboard
from app.extensions import db
from app.links import public_link
from app.models.types import utcnow
from app.scheduling.timezones import timezone_names
from app.services.accounts.team import (
    accept_invitation,
    agency_users,
    get_agency_user,
    invite_user,
    new_sub_account,
    open_invitation,
    pending_invitation,
    renew_invitation,
    set_grants,
    set_user_active,
)
from app.services.accounts.users import visible_sub_accounts
from app.services.common.errors import InvalidRequest


class NewSubAccountForm(FlaskForm):
    name = StringField("Name")
    timezone = StringField("Timezone", default="UTC")


class InviteForm(FlaskForm):
    email = EmailField("Email")
    sub_accounts = MultiCheckboxField(
        "Sub accounts they may open", coerce=int, validate_choice=False
    )


class GrantsForm(FlaskForm):
    sub_accounts = MultiCheckboxField(
        "Sub accounts they may open", coerce=int, validate_choice=False
    )


class AcceptForm(FlaskForm):
    password = password_field("Choose a password", new=True)


def _sub_account_choices(form_field: MultiCheckboxField) -> None:
    form_field.choices = [(s.id, s.name) for s in visible_sub_accounts(current_user)]


def _team_page(**forms: FlaskForm) -> str:
    sub_account_form = forms.get("sub_account_form") or NewSubAccountForm(formdata=None)
    invite_form = forms.get("invite_form") or InviteForm(formdata=None)
    _sub_account_choices(invite_form.sub_accounts)
    users = agency_users(current_user)
    return render_template(
        "dashboard/team.html",
        sub_accounts=visible_sub_accounts(current_user),
        users=users,
        invited={u.id for u in users if pending_invitation(u) is not None},
        sub_account_form=sub_account_form,
        invite_form=invite_form,
        timezones=timezone_names(),
    )


@dashboard.route("/team")
@owners_only
def team() -> str:
    return _team_page()


@dashboard.route("/team/sub-accounts", methods=["POST"])
@owners_only
def team_new_sub_account() -> str | Response:
    form = NewSubAccountForm()
    if not form.validate_on_submit():
        return _team_page(sub_account_form=form)
    try:
        created = new_sub_account(
            current_user, {"name": form.name.data or "", "timezone": form.timezone.data or ""}
        )
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        show_errors(form, err)
        return _team_page(sub_account_form=form)
    flash(f"Sub account “{created.name}” created.")
    return redirect(url_for("dashboard.overview", sub_account_id=created.id))


@dashboard.route("/team/invitations", methods=["POST"])
@owners_only
def team_invite() -> str | Response:
    form = InviteForm()
    _sub_account_choices(form.sub_accounts)
    if not form.validate_on_submit():
        return _team_page(invite_form=form)
    try:
        user, token = invite_user(
            current_user, {"email": form.email.data or ""}, form.sub_accounts.data, now=utcnow()
        )
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        show_errors(form, err, {"_sub_accounts": "sub_accounts"})
        return _team_page(invite_form=form)
    return _show_link_once(user.email, token)


def _show_link_once(email: str, token: str) -> Response:
    """The link, in this answer only: it is not stored in plain anywhere, and not cached."""
    link = public_link("auth.accept_invitation", token=token)
    response = make_response(render_template("dashboard/invitation.html", email=email, link=link))
    response.headers["Cache-Control"] = "no-store"
    return response


@dashboard.route("/team/users/<int:user_id>", methods=["GET", "POST"])
@owners_only
def team_user(user_id: int) -> str | Response:
    user = get_agency_user(current_user, user_id)
    form = GrantsForm(data={"sub_accounts": [s.id for s in user.granted_sub_accounts]})
    _sub_account_choices(form.sub_accounts)
    if form.validate_on_submit():
        try:
            set_grants(current_user, user.id, form.sub_accounts.data)
            db.session.commit()
        except InvalidRequest as err:
            db.session.rollback()
            show_errors(form, err)
        else:
            flash(f"{user.email} may now open {len(form.sub_accounts.data)} sub account(s).")
            return redirect(url_for("dashboard.team_user", user_id=user.id))
    return render_template(
        "dashboard/team_user.html",
        user=user,
        form=form,
        action_form=ActionForm(),
        invited=pending_invitation(user) is not None,
    )


@dashboard.route(
    "/team/users/<int:user_id>/<any(activate, deactivate, renew):action>", methods=["POST"]
)
@owners_only
def team_user_action(user_id: int, action: str) -> str | Response:
    user = get_agency_user(current_user, user_id)
    page = url_for("dashboard.team_user", user_id=user.id)
    if not ActionForm().validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(page)
    try:
        if action == "renew":
            token = renew_invitation(current_user, user.id, now=utcnow())
        else:
            set_user_active(current_user, user.id, action == "activate")
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not done: {err.message}")
        return redirect(page)
    if action == "renew":
        return _show_link_once(user.email, token)
    flash(f"{user.email} can {'now' if user.active else 'no longer'} sign in.")
    return redirect(page)


@auth.route("/invite/<token>", methods=["GET", "POST"], endpoint="accept_invitation")
def accept_invitation_page(token: str) -> str | Response | tuple[str, int]:
    """Where an invited user chooses a password; the link works once."""
    try:
        invitation = open_invitation(token, now=utcnow())
    except InvalidRequest as err:
        return render_template("dashboard/invitation_unusable.html", message=err.message), 404
    form = AcceptForm()
    if form.validate_on_submit():
        try:
            user = accept_invitation(token, form.password.data, now=utcnow())
            db.session.commit()
        except InvalidRequest as err:
            db.session.rollback()
            show_errors(form, err)
        else:
            start_session(user)
            flash("Welcome! Your password is set.")
            return redirect(url_for("dashboard.home"))
    return render_template(
        "dashboard/accept_invitation.html", form=form, email=invitation.user.email
    )
