"""How a dashboard page runs a change: one service call in one transaction, its refusal shown
next to the form's fields (a form: ``commit_or_show``, or the whole POST of a form page:
``save_form``) or flashed (a button: ``press_button``). A form without its CSRF token changes
nothing. Every form page that saves through a service goes through here, so a refusal is rolled
back and shown the same way everywhere."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import flash
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response

from app.dashboard.forms import FORM_EXPIRED, show_errors
from app.extensions import db
from app.services.common.errors import InvalidRequest

# What a page's view answers: the page, a redirect, or the page with its status.
Page = str | Response | tuple[str, int]


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


def save_form(
    form: FlaskForm,
    change: Callable[[], Any],
    page: Callable[[], str],
    fields: Mapping[str, str] | None = None,
    *,
    invalid_status: int | None = None,
) -> tuple[Any, Page | None]:
    """A form page's POST, run alike on every page: ``(change()'s result, None)`` once
    committed, else ``(None, the answer)`` for the view to return, the form's ``page`` again
    with the problems beside its fields: 200 when the service refused the change, and for a
    form that does not validate ``invalid_status``, by default 400 when its CSRF token failed
    and 200 otherwise (the person corrects a field)."""
    answer = invalid_form(form, page, invalid_status)
    if answer is not None:
        return None, answer
    return save_valid_form(form, change, page, fields)


def invalid_form(
    form: FlaskForm, page: Callable[[], str], status: int | None = None
) -> tuple[str, int] | None:
    """The answer to a form that does not validate (``save_form``'s first step), or ``None``
    for a valid one."""
    if form.validate_on_submit():
        return None
    return page(), status or (400 if form.csrf_token.errors else 200)


def save_valid_form(
    form: FlaskForm,
    change: Callable[[], Any],
    page: Callable[[], str],
    fields: Mapping[str, str] | None = None,
) -> tuple[Any, Page | None]:
    """``save_form`` for a form already validated: the change committed, or refused and the
    form's ``page`` shown again."""
    try:
        return commit_or_show(form, change, fields), None
    except Refused:
        return None, page()


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
