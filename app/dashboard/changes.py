"""How a dashboard page runs a change: one service call in one transaction, its refusal shown
next to the form's fields (a form: ``commit_or_show``) or flashed (a button: ``press_button``).
A form without its CSRF token changes nothing. Every form page that saves through a service
goes through here, so a refusal is rolled back and shown the same way everywhere."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import flash
from flask_wtf import FlaskForm

from app.dashboard.forms import FORM_EXPIRED, show_errors
from app.extensions import db
from app.services.common.errors import InvalidRequest


class Refused(Exception):
    """The service refused the change; its reasons are on the form."""


def commit_or_show(
    form: FlaskForm, change: Callable[[], Any], fields: Mapping[str, str] | None = None
) -> Any:
    """``change()``'s result, committed. When the service refuses, nothing is kept and its
    reasons are put next to ``form``'s fields (``fields`` maps document names to the form's),
    then ``Refused`` is raised for the view to show the form again."""
    try:
        result = change()
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        show_errors(form, err, fields)
        raise Refused() from None
    return result


def press_button(form: FlaskForm, change: Callable[[], Any], done: str) -> bool:
    """A button's change (its form carries only the CSRF token), run and committed or
    refused; either way the outcome is flashed for the page the view redirects to. Whether
    it was done."""
    if not form.validate_on_submit():
        flash(FORM_EXPIRED)
        return False
    try:
        change()
        db.session.commit()
    except InvalidRequest as err:
        db.session.rollback()
        flash(f"Not done: {err.message}")
        return False
    flash(done)
    return True
