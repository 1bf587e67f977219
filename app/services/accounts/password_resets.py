"""Forgotten passwords: a one-time link by mail, and choosing a new password through it.

Asking names an email and learns nothing about it: whether an active user has it or not, the
asker is told the same, and the request does the same work. It looks nothing up and writes
nothing: it hands the email to the worker (``ask_for_link``, one ``MAIL_TASK``), and the
worker, as for every other mail, looks the account up, applies the per-account ceiling, makes
the link and mails it (``app.jobs.accounts.mail_reset_link``). The link is valid for
``RESET_VALID_FOR`` and works once; only a SHA-256 digest of its token is stored
(``password_resets``), and the task carries the email, never a token. Using the link sets the
new password under the same policy as changing one, voids the user's other links, and ends
every session the user had: whoever was signed in with the old password is signed out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, func, select, update

from app.extensions import db
from app.models import PasswordReset, User
from app.services.accounts.passwords import hash_password
from app.services.accounts.users import end_sessions, password_problems
from app.services.common.errors import InvalidRequest
from app.services.common.tokens import new_token, token_digest
from app.services.integrations.notifications.password_reset_mail import ResetLink
from app.services.integrations.registry import app_registry

RESET_VALID_FOR = timedelta(hours=1)
RESET_VALID_FOR_WORDS = "one hour"
# However many addresses ask for one account's link, it is mailed at most this many links in
# ``RESET_VALID_FOR``: the throttle counts requests (per address, per account, in Redis or a
# process's memory); this bounds the mail itself, from the links stored, whatever asked.
MAX_LINKS_PER_ACCOUNT = 3
# The worker's task that mails a link (``worker.tasks.accounts``): its one argument is the
# email as asked for, trimmed and lower-cased.
MAIL_TASK = "accounts.mail_reset_link"


class ResetLinkUnusable(InvalidRequest):
    message = "This link is not valid."


LINK_USED = "This link was used already: each link works once."
LINK_EXPIRED = f"This link has expired: a link works for {RESET_VALID_FOR_WORDS}."


def ask_for_link(email: str) -> None:
    """Hand a request for a link to the worker: one ``MAIL_TASK`` with the email, whatever it
    is. Nothing is read or written here, so the request's work, and its time, is the same
    whether an account has the email or not. No transaction holds it: should the broker be
    away, the request is lost (logged), as a message the mail server refuses is, and the person
    asks again."""
    for dispatcher in list(app_registry().task_dispatchers):
        dispatcher(MAIL_TASK, [email.strip().lower()], 0.0)


def make_reset_link(email: str, *, now: datetime, link: Callable[[str], str]) -> ResetLink | None:
    """Store a new link for the active user whose email is ``email`` and return the message
    that mails it (``link(token)``, absolute); None when no active user has it, or when it was
    given ``MAX_LINKS_PER_ACCOUNT`` links in the last ``RESET_VALID_FOR``.

    The account is held while its links are counted and the new one stored, so requests
    handled at once (several worker processes) cannot each find room under the ceiling.
    Flushes; the worker's job (``app.jobs.accounts.mail_reset_link``) commits, then sends."""
    user = db.session.scalar(select(User).where(User.email == email.strip().lower()))
    if user is None or not user.active:
        return None
    _hold(user)
    recent = db.session.scalar(
        select(func.count())
        .select_from(PasswordReset)
        .where(PasswordReset.user_id == user.id, PasswordReset.created_at > now - RESET_VALID_FOR)
    )
    if recent and recent >= MAX_LINKS_PER_ACCOUNT:
        return None  # enough links are on their way: the newest still works
    token = new_token()
    reset = PasswordReset(
        user_id=user.id,
        token_digest=token_digest(token),
        created_at=now,
        expires_at=now + RESET_VALID_FOR,
    )
    db.session.add(reset)
    db.session.flush()
    return ResetLink(
        recipient=user.email,
        link=link(token),
        valid_for=RESET_VALID_FOR_WORDS,
        dedupe_key=f"password.reset:{reset.id}",
    )


def _hold(user: User) -> None:
    """Hold ``user``'s row until the transaction ends (a row lock): a second job for the same
    account waits here, then counts the link this one stores."""
    db.session.execute(select(User.id).where(User.id == user.id).with_for_update())


def open_reset(token: str, *, now: datetime) -> PasswordReset:
    """The unused, unexpired link with this token, whose user may still sign in."""
    reset = db.session.scalar(
        select(PasswordReset).where(PasswordReset.token_digest == token_digest(token))
    )
    if reset is None or not reset.user.active:
        raise ResetLinkUnusable()
    if reset.used_at is not None:
        raise ResetLinkUnusable(LINK_USED)
    if reset.expires_at <= now:
        raise ResetLinkUnusable(LINK_EXPIRED)
    return reset


def reset_password(token: str, password: str, *, now: datetime) -> User:
    """Set ``password`` as the user's, through the link ``token`` names, which then works no
    more; the user's other links stop working, and every session of theirs ends."""
    reset = open_reset(token, now=now)
    problems = password_problems(password)
    if problems:
        raise InvalidRequest("The password was not set.", errors={"password": problems})
    # Claimed in one statement: of two uses of one link at once, one finds it used.
    claimed = cast(
        CursorResult[Any],  # an UPDATE's result, typed as a plain Result
        db.session.execute(
            update(PasswordReset)
            .where(PasswordReset.id == reset.id, PasswordReset.used_at.is_(None))
            .values(used_at=now)
            .execution_options(synchronize_session=False)
        ),
    )
    if claimed.rowcount != 1:
        raise ResetLinkUnusable(LINK_USED)
    db.session.execute(
        update(PasswordReset)
        .where(
            PasswordReset.user_id == reset.user_id,
            PasswordReset.used_at.is_(None),
            PasswordReset.expires_at > now,
        )
        .values(expires_at=now)
        .execution_options(synchronize_session=False)
    )
    user = reset.user
    user.password_hash = hash_password(password)
    end_sessions(user)
    db.session.flush()
    return user
