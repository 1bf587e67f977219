"""The consent page of an agent connecting with OAuth 2.1 (the authorization endpoint of
``app.oauth``): an agency owner, signed in, sees which client asks, chooses the calendar (sub
account) and the permissions it gets, and allows or denies. Allowing makes a grant, an API key
of that sub account listed on its API keys page, where it is revoked; the client is sent back
to its redirect URI with a code, or with ``error=access_denied``.

A request that does not check out (an unknown client, a redirect URI not registered exactly,
no PKCE ``S256`` challenge) is refused on this page and never redirected: an unverified
redirect URI is not followed. The page is the dashboard's: unframable, its form CSRF-protected,
and only an owner may answer it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749.util import scope_to_list
from flask import current_app, g, render_template, request
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import SelectField
from wtforms.fields.choices import SelectChoice

from app.dashboard.areas import owners_only
from app.dashboard.changes import Page
from app.dashboard.forms import MultiCheckboxField
from app.dashboard.views import dashboard
from app.extensions import db
from app.models.types import utcnow
from app.services.accounts.agent_access import SCOPES, grant_access
from app.services.accounts.api_keys import PERMISSION_LABELS
from app.services.accounts.users import open_sub_account, visible_sub_accounts

ALLOW, DENY = "allow", "deny"
CHOOSE_A_PERMISSION = "Choose at least one thing it may do."


class ConsentForm(FlaskForm):
    sub_account_id = SelectField("Calendar", coerce=int, validate_choice=False)
    permissions = MultiCheckboxField(
        "What it may do",
        choices=[SelectChoice(value, label) for value, label in PERMISSION_LABELS.items()],
        validate_choice=False,
    )


@dashboard.route("/connect-agent", methods=["GET", "POST"])
@owners_only
def connect_agent() -> Page | Response:
    server = current_app.extensions["oauth_server"]
    try:
        grant = server.get_consent_grant(end_user=current_user)
    except OAuth2Error as error:
        return render_template("dashboard/agent_consent_refused.html", error=error), 400
    client = grant.client.row
    redirect_uri = grant.redirect_uri
    form = ConsentForm()
    form.sub_account_id.choices = [
        SelectChoice(s.id, s.name) for s in visible_sub_accounts(current_user) if s.active
    ]
    # Chrome holds a form's redirect to the CSP's form-action: the client's origin is allowed.
    parts = urlsplit(redirect_uri)
    g.form_targets = [f"{parts.scheme}://{parts.netloc}"]

    def page(status: int = 200) -> tuple[str, int]:
        return render_template(
            "dashboard/agent_consent.html",
            form=form,
            client=client,
            redirect_host=parts.netloc,
            resource=grant.request.payload.data.get("resource"),
            labels=PERMISSION_LABELS,
        ), status

    if request.method == "GET":
        asked = scope_to_list(grant.request.payload.scope) or list(SCOPES)
        form.permissions.data = [p for p in SCOPES if p in asked]
        return page()
    if not form.validate_on_submit():
        return page(400)
    if request.form.get("decision") != ALLOW:
        return server.create_authorization_response(grant_user=None, grant=grant)
    permissions = [p for p in form.permissions.data or [] if p in SCOPES]
    if not permissions:
        form.permissions.errors = [CHOOSE_A_PERMISSION]
        return page(400)
    sub_account = open_sub_account(current_user, form.sub_account_id.data)
    made: Any = grant_access(
        client=client,
        sub_account=sub_account,
        permissions=permissions,
        user_id=current_user.id,
        now=utcnow(),
    )
    response = server.create_authorization_response(grant_user=made, grant=grant)
    if response.status_code == 302 and "code=" in response.headers.get("Location", ""):
        db.session.commit()
    else:  # refused after all: no grant without its code
        db.session.rollback()
    return response
