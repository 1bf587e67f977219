"""The dashboard's forms (Flask-WTF: each carries and checks a CSRF token)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Length


class SignInForm(FlaskForm):
    # Any text: a malformed address simply matches no account (and test domains stay usable).
    email = EmailField("Email", validators=[DataRequired(), Length(max=254)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=1024)])


class SignOutForm(FlaskForm):
    """Only the CSRF token: signing out is a POST a third-party page cannot send."""


class PasswordForm(FlaskForm):
    current_password = PasswordField(
        "Current password", validators=[DataRequired(), Length(max=1024)]
    )
    new_password = PasswordField("New password", validators=[DataRequired(), Length(max=1024)])
