"""Pages that show a new secret (an API key, a webhook signing secret) exactly once.

The secret is rendered straight into the answer to the POST that made it, marked
``Cache-Control: no-store``, and kept nowhere else: not in the session cookie, which is signed
but readable. A reload would send that POST again, so each form carries a single-use ticket
(issued with the page, remembered in the session, given up when the secret is made): the
resent form finds its ticket gone and is turned away instead of making, and showing, another
secret. ``save_secret_form`` runs such a form's POST up to the secret; ``show_secret`` answers
with it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any

from flask import flash, make_response, redirect, render_template, session
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response

from app.dashboard.changes import Page, invalid_form, save_valid_form

_SESSION_KEY = "show_once_tickets"
_KEPT = 10  # one per open form; the oldest go first


def issue_ticket() -> str:
    """A ticket for one form that makes a secret."""
    ticket = secrets.token_urlsafe(16)
    session[_SESSION_KEY] = [*session.get(_SESSION_KEY, [])[-(_KEPT - 1) :], ticket]
    return ticket


def ticket_valid(ticket: str | None) -> bool:
    """Whether the form's ticket is still unused."""
    return bool(ticket) and ticket in session.get(_SESSION_KEY, [])


def use_ticket(ticket: str) -> None:
    """Give the ticket up: the secret is made, and this form makes no other."""
    session[_SESSION_KEY] = [t for t in session.get(_SESSION_KEY, []) if t != ticket]


def save_secret_form(
    form: FlaskForm,
    change: Callable[[], Any],
    page: Callable[[], str],
    fields: Mapping[str, str] | None = None,
    *,
    resent: tuple[str, str],
) -> tuple[Any, Page | None]:
    """The POST of a form that makes a secret, as ``save_form`` runs a form page's: ``(what
    change() made, None)`` once committed, else ``(None, the answer)``. An invalid form is its
    ``page`` with a 400; a form whose ticket is used up (a reload of the secret's page) makes
    nothing and is sent back (303) to ``resent``'s page, saying ``resent``'s message."""
    answer = invalid_form(form, page, 400)
    if answer is not None:
        return None, answer
    if not ticket_valid(form.ticket.data):
        back, message = resent
        flash(message)
        return None, redirect(back, 303)
    return save_valid_form(form, change, page, fields)


def show_secret(ticket: str, template: str, **context: object) -> Response:
    """The answer to the form that made a secret: its ticket given up (``use_ticket``), and
    ``template`` rendered with the secret as a ``secret_page``. Every such form ends so."""
    use_ticket(ticket)
    return secret_page(render_template(template, **context))


def secret_page(html: str) -> Response:
    """The page with the secret, kept by no cache (the browser's back button included)."""
    response = make_response(html)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    return response
