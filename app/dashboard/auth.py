"""Signing in and out, and changing one's password."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user, login_required, login_user, logout_user
from werkzeug.wrappers import Response

from app.dashboard.forms import PasswordForm, SignInForm, SignOutForm
from app.dashboard.throttle import count_failed_sign_in, sign_in_allowed
from app.extensions import db
from app.models import User
from app.models.types import utcnow
from app.services.accounts.users import (
    authenticate,
    change_password,
    end_session,
    open_session,
    session_user,
)
from app.services.common.errors import ServiceError

auth = Blueprint("auth", __name__)


def page_forms() -> dict:
    """What every dashboard page's header needs (the sign-out button's CSRF token)."""
    return {"sign_out_form": SignOutForm()}


auth.context_processor(page_forms)

TOO_MANY = "Too many failed sign-ins. Wait a few minutes, then try again."


@auth.route("/login", methods=["GET", "POST"])
def sign_in() -> str | Response | tuple[str, int]:
    if current_user.is_authenticated:
        return redirect(url_for("dashboard.home"))
    form = SignInForm()
    if request.method == "POST" and not form.validate_on_submit():
        status = 400 if form.csrf_token.errors else 200
        return render_template("dashboard/sign_in.html", form=form), status
    if request.method == "POST":
        email = form.email.data.strip().lower()
        address = request.remote_addr or "unknown"
        if not sign_in_allowed(address, email):
            return render_template("dashboard/sign_in.html", form=form, error=TOO_MANY), 429
        user = authenticate(email, form.password.data)
        if user is None:
            count_failed_sign_in(address, email)
            error = "The email or the password is wrong."
            return render_template("dashboard/sign_in.html", form=form, error=error), 200
        start_session(user)
        return redirect(_safe_next() or url_for("dashboard.home"))
    return render_template("dashboard/sign_in.html", form=form)


SESSION_TOKEN = "session_token"


def start_session(user: User) -> None:
    """A fresh session for ``user`` (nothing carried over from before the sign-in), expiring
    after ``DASHBOARD_SESSION_HOURS``, known to the server (``accounts.open_session``) so that
    signing out or a password change can end it. Commits."""
    lifetime = current_app.permanent_session_lifetime
    token = open_session(user, now=utcnow(), lifetime=lifetime)
    db.session.commit()
    session.clear()
    session.permanent = True
    session[SESSION_TOKEN] = token
    login_user(user)


def signed_in_user(user_id: str) -> User | None:
    """Flask-Login's user loader: the user this request's session belongs to, while the
    server still knows that session."""
    token = session.get(SESSION_TOKEN)
    if not user_id.isdigit() or not isinstance(token, str):
        return None
    return session_user(int(user_id), token, now=utcnow())


def _safe_next() -> str | None:
    """Where the sign-in was asked for, if it is a path of this site."""
    return same_site_path(request.args.get("next", ""))


def same_site_path(target: str) -> str | None:
    """``target`` when a browser would read it as a path on this site, else ``None``.

    Browsers forgive a lot: they drop tabs and newlines anywhere in a URL, and leading control
    characters and spaces, read ``\\`` as ``/``, and take ``//host`` as another site. So a
    target with any control character, space or backslash is refused; it must start with
    exactly one slash and name no scheme or host; and its path, percent-decoded (``%2F``,
    ``%5C``, ``%09``), must pass the same checks, for whatever decodes it again later."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None
    for form in (target, unquote(parts.path)):
        if not form.startswith("/") or form.startswith("//") or "\\" in form:
            return None
        if any(not character.isprintable() or character.isspace() for character in form):
            return None
    return target


@auth.route("/logout", methods=["POST"])
def sign_out() -> Response:
    if not SignOutForm().validate_on_submit():
        abort(400)
    token = session.get(SESSION_TOKEN)
    if isinstance(token, str):
        end_session(token)
        db.session.commit()
    logout_user()
    session.clear()
    flash("You are signed out.")
    return redirect(url_for("auth.sign_in"))


@auth.route("/dashboard/password", methods=["GET", "POST"])
@login_required
def password() -> str | Response | tuple[str, int]:
    form = PasswordForm()
    if request.method == "POST":
        if not form.validate_on_submit():
            status = 400 if form.csrf_token.errors else 200
            return render_template("dashboard/password.html", form=form), status
        try:
            change_password(
                current_user,
                form.current_password.data,
                form.new_password.data,
                keep_session=session.get(SESSION_TOKEN),
            )
            db.session.commit()
        except ServiceError as err:
            db.session.rollback()
            for name, messages in (err.errors or {}).items():
                getattr(form, name).errors = list(messages)
            return render_template("dashboard/password.html", form=form), 200
        flash("Your password is changed.")
        return redirect(url_for("dashboard.home"))
    return render_template("dashboard/password.html", form=form)
