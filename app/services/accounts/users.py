"""Dashboard users: signing in, their sessions, changing a password (and what a new password
must be), and which sub accounts a user may open.

A session exists while its row in ``dashboard_sessions`` does (``open_session``); the cookie
only names it. So a session ends for good the moment it is ended here, whatever copies of its
cookie are around.

Agency owners open every sub account of their agency; agency users only those granted to them.
Another agency's sub account is, to a user, one that does not exist.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select

from app.extensions import db
from app.models import DashboardSession, Role, SubAccount, User
from app.services.accounts.passwords import hash_password, verify_password
from app.services.common.errors import InvalidRequest, NotFound
from app.services.common.lookups import get_checked
from app.services.common.tokens import new_token, token_digest

MIN_PASSWORD_LENGTH = 10
# The rule a new password must meet, as the forms state it before the first try.
PASSWORD_RULE = f"At least {MIN_PASSWORD_LENGTH} characters."

# Compared against when the email is unknown, so a wrong email costs as long as a wrong
# password and the time does not tell which accounts exist.
_UNKNOWN_USER_HASH = hash_password("no such user, no such password")


class SubAccountNotFound(NotFound):
    message = "Sub account not found"


def authenticate(email: str, password: str) -> User | None:
    """The active user with this email and password, else None."""
    user = db.session.scalar(select(User).where(User.email == email.strip().lower()))
    if user is None:
        verify_password(_UNKNOWN_USER_HASH, password)
        return None
    if not verify_password(user.password_hash, password) or not user.active:
        return None
    return user


def open_session(user: User, *, now: datetime, lifetime: timedelta) -> str:
    """A new dashboard session for ``user``, ending by ``now + lifetime``; returns the token
    the session cookie carries. The user's expired sessions are cleared on the way."""
    db.session.execute(
        delete(DashboardSession).where(
            DashboardSession.user_id == user.id, DashboardSession.expires_at <= now
        )
    )
    token = new_token()
    db.session.add(
        DashboardSession(
            user_id=user.id,
            token_digest=token_digest(token),
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    db.session.flush()
    return token


def session_user(user_id: int, token: str, *, now: datetime) -> User | None:
    """The active user whose live session ``token`` names, if it is ``user_id``'s."""
    return db.session.scalar(
        select(User)
        .join(DashboardSession, DashboardSession.user_id == User.id)
        .where(
            User.id == user_id,
            User.active.is_(True),
            DashboardSession.token_digest == token_digest(token),
            DashboardSession.expires_at > now,
        )
    )


def end_session(token: str) -> None:
    """End the session ``token`` names (signing out)."""
    db.session.execute(
        delete(DashboardSession).where(DashboardSession.token_digest == token_digest(token))
    )


def end_sessions(user: User, *, keep: str | None = None) -> None:
    """End every session of ``user``, but the one ``keep`` names."""
    stmt = delete(DashboardSession).where(DashboardSession.user_id == user.id)
    if keep is not None:
        stmt = stmt.where(DashboardSession.token_digest != token_digest(keep))
    db.session.execute(stmt)


def password_problems(password: str) -> list[str]:
    """What is wrong with ``password`` as a new password (none: it may be set)."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return [f"Use at least {MIN_PASSWORD_LENGTH} characters."]
    return []


def change_password(user: User, current: str, new: str, *, keep_session: str | None) -> None:
    """Set ``new`` as the user's password, if ``current`` is the one they have, and end the
    user's other sessions (``keep_session``, the one asking, stays): whoever else was signed in
    with the old password is signed out."""
    errors: dict[str, list[str]] = {}
    if not verify_password(user.password_hash, current):
        errors["current_password"] = ["This is not your current password."]
    if problems := password_problems(new):
        errors["new_password"] = problems
    if errors:
        raise InvalidRequest("The password was not changed.", errors=errors)
    user.password_hash = hash_password(new)
    end_sessions(user, keep=keep_session)
    db.session.flush()


def visible_sub_accounts(user: User) -> list[SubAccount]:
    """The sub accounts ``user`` may open, by name."""
    stmt = select(SubAccount).where(SubAccount.agency_id == user.agency_id)
    if user.role != Role.AGENCY_OWNER:
        granted = [s.id for s in user.granted_sub_accounts]
        stmt = stmt.where(SubAccount.id.in_(granted))
    return list(db.session.scalars(stmt.order_by(SubAccount.name, SubAccount.id)))


def open_sub_account(user: User, sub_account_id: int) -> SubAccount:
    """The sub account, if ``user`` may open it; otherwise it does not exist (404)."""
    sub_account = get_checked(
        SubAccount, sub_account_id, lambda s: s.agency_id == user.agency_id, SubAccountNotFound
    )
    if user.role != Role.AGENCY_OWNER and sub_account not in user.granted_sub_accounts:
        raise SubAccountNotFound()
    return sub_account
