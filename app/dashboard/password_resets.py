"""Forgot password: asking for a one-time link by mail (``/forgot-password``) and choosing a new
password through it (``/reset-password/<token>``, the link the mail carries).

The answer to asking is the same for every email, and so is the work behind it: the request
looks nothing up, and hands the email to the worker (``password_resets.ask_for_link``), which
makes the link and mails it as it sends every other mail, so neither the answer's words, its
status nor its time says whether an account has that email. Asking is throttled as signing in
is (``throttle``), every request counted alike, so a refusal says nothing about the account
either.
"""

from __future__ import annotations

from flask import (
    flash,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import EmailField
from wtforms.validators import DataRequired, Length

from app.dashboard.auth import auth, start_session
from app.dashboard.forms import password_field, show_errors
from app.dashboard.throttle import count_reset_request, reset_request_allowed
from app.extensions import db
from app.models.limits import EMAIL_MAX
from app.models.types import utcnow
from app.services.accounts.password_resets import (
    ResetLinkUnusable,
    ask_for_link,
    open_reset,
    reset_password,
)
from app.services.common.errors import InvalidRequest

TOO_MANY = "Too many requests for a link. Wait a few minutes, then try again."


class ForgotPasswordForm(FlaskForm):
    # Any text: a malformed address simply matches no account, as on the sign-in page.
    email = EmailField("Email", validators=[DataRequired(), Length(max=EMAIL_MAX)])


class ResetPasswordForm(FlaskForm):
    password = password_field("New password", new=True)


@auth.route("/forgot-password", methods=["GET", "POST"])
def forgot_password() -> str | tuple[str, int]:
    form = ForgotPasswordForm()
    if request.method == "POST" and not form.validate_on_submit():
        status = 400 if form.csrf_token.errors else 200
        return render_template("dashboard/forgot_password.html", form=form), status
    if request.method == "POST":
        email = form.email.data.strip().lower()
        address = request.remote_addr or "unknown"
        if not reset_request_allowed(address, email):
            page = render_template("dashboard/forgot_password.html", form=form, error=TOO_MANY)
            return page, 429
        count_reset_request(address, email)
        ask_for_link(email)
        return render_template("dashboard/forgot_password_sent.html", email=email)
    return render_template("dashboard/forgot_password.html", form=form)


@auth.route("/reset-password/<token>", methods=["GET", "POST"], endpoint="reset_password")
def reset_password_page(token: str) -> Response:
    """Where the mailed link leads: choose a new password; the link works once."""
    try:
        reset = open_reset(token, now=utcnow())
    except InvalidRequest as err:
        return _unusable(err)
    form = ResetPasswordForm()
    if form.validate_on_submit():
        try:
            user = reset_password(token, form.password.data, now=utcnow())
            db.session.commit()
        except ResetLinkUnusable as err:
            db.session.rollback()
            return _unusable(err)
        except InvalidRequest as err:
            db.session.rollback()
            show_errors(form, err)
        else:
            start_session(user)
            flash("Your password is changed and you are signed in; every other session has ended.")
            return redirect(url_for("dashboard.home"))
    page = render_template("dashboard/reset_password.html", form=form, email=reset.user.email)
    return _not_kept(make_response(page))


def _unusable(err: InvalidRequest) -> Response:
    page = render_template("dashboard/reset_link_unusable.html", message=err.message)
    return _not_kept(make_response(page, 404))


def _not_kept(response: Response) -> Response:
    """A page whose address carries a live token: not cached anywhere."""
    response.headers["Cache-Control"] = "no-store"
    return response
