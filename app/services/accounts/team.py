"""An agency's people and workspaces, as its owner manages them: new sub accounts, invited
agency users and the sub accounts each may open.

Every function takes the acting owner and works inside the owner's agency only: another
agency's user or sub account is one that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from marshmallow import Schema, fields, validate
from sqlalchemy import func, select

from app.extensions import db
from app.models import Invitation, Role, SubAccount, User
from app.models.limits import EMAIL_MAX
from app.services.accounts.passwords import hash_password
from app.services.accounts.provisioning import add_sub_account
from app.services.accounts.users import SubAccountNotFound, end_sessions, password_problems
from app.services.common.errors import InvalidRequest, NotFound
from app.services.common.lookups import get_checked, load_document
from app.services.common.tokens import new_token, token_digest
from app.validation import describe_errors

INVITATION_VALID_FOR = timedelta(days=7)
# Stored as the password hash of an invited user who has not chosen one: no argon2 hash looks
# like this, so no password verifies against it.
NO_PASSWORD = "!invited"


class UserNotFound(NotFound):
    message = "User not found"


class InvitationUnusable(InvalidRequest):
    message = "This invitation link is not valid: it was used already, or it expired."


class InvitationDoc(Schema):
    email = fields.Email(required=True, validate=validate.Length(max=EMAIL_MAX))


def agency_users(owner: User) -> list[User]:
    """The agency's users, owners first, then by email."""
    stmt = select(User).where(User.agency_id == owner.agency_id)
    return list(db.session.scalars(stmt.order_by(User.role.desc(), User.email)))


def pending_invitation(user: User) -> Invitation | None:
    """The user's unused invitation, if they have not accepted one yet."""
    return db.session.scalar(
        select(Invitation)
        .where(Invitation.user_id == user.id, Invitation.accepted_at.is_(None))
        .order_by(Invitation.id.desc())
    )


def new_sub_account(owner: User, document: dict[str, Any]) -> SubAccount:
    """A sub account of the owner's agency (``name``, ``timezone``), with the calendar
    settings' defaults."""
    return add_sub_account(owner.agency, document)


def _own_sub_accounts(owner: User, ids: Iterable[int]) -> list[SubAccount]:
    wanted = set(ids)
    found = list(
        db.session.scalars(
            select(SubAccount).where(
                SubAccount.agency_id == owner.agency_id, SubAccount.id.in_(wanted)
            )
        )
    )
    if len(found) != len(wanted):
        raise SubAccountNotFound()
    return found


def invite_user(
    owner: User, document: dict[str, Any], sub_account_ids: Iterable[int], *, now: datetime
) -> tuple[User, str]:
    """An agency user who may open ``sub_account_ids`` once they choose a password through
    the returned one-time token (valid for ``INVITATION_VALID_FOR``)."""
    doc = load_document(InvitationDoc(), document)
    email = doc["email"].strip().lower()
    if db.session.scalar(select(User.id).where(func.lower(User.email) == email)) is not None:
        errors = {"email": [f"A user with email '{email}' exists."]}
        raise InvalidRequest(describe_errors(errors), errors=errors)
    user = User(
        agency_id=owner.agency_id,
        email=email,
        password_hash=NO_PASSWORD,
        role=Role.AGENCY_USER,
        active=False,
    )
    user.granted_sub_accounts = _own_sub_accounts(owner, sub_account_ids)
    db.session.add(user)
    db.session.flush()
    return user, _new_invitation(owner, user, now)


def renew_invitation(owner: User, user_id: int, *, now: datetime) -> str:
    """A fresh link for a user who has not accepted theirs; the old links stop working."""
    user = get_agency_user(owner, user_id)
    if pending_invitation(user) is None:
        raise InvalidRequest(f"{user.email} has already accepted an invitation.")
    for invitation in db.session.scalars(
        select(Invitation).where(Invitation.user_id == user.id, Invitation.accepted_at.is_(None))
    ):
        invitation.expires_at = min(invitation.expires_at, now)
    return _new_invitation(owner, user, now)


def _new_invitation(owner: User, user: User, now: datetime) -> str:
    token = new_token()
    db.session.add(
        Invitation(
            user_id=user.id,
            token_digest=token_digest(token),
            invited_by_user_id=owner.id,
            created_at=now,
            expires_at=now + INVITATION_VALID_FOR,
        )
    )
    db.session.flush()
    return token


def open_invitation(token: str, *, now: datetime) -> Invitation:
    """The unused, unexpired invitation with this token."""
    invitation = db.session.scalar(
        select(Invitation).where(Invitation.token_digest == token_digest(token))
    )
    if invitation is None or invitation.accepted_at is not None or invitation.expires_at <= now:
        raise InvitationUnusable()
    return invitation


def accept_invitation(token: str, password: str, *, now: datetime) -> User:
    """Set the invited user's password and let them sign in; the link works once."""
    invitation = open_invitation(token, now=now)
    if problems := password_problems(password):
        raise InvalidRequest("The password was not set.", errors={"password": problems})
    invitation.accepted_at = now
    user = invitation.user
    user.password_hash = hash_password(password)
    user.active = True
    db.session.flush()
    return user


def get_agency_user(owner: User, user_id: int) -> User:
    return get_checked(User, user_id, lambda u: u.agency_id == owner.agency_id, UserNotFound)


def set_grants(owner: User, user_id: int, sub_account_ids: Iterable[int]) -> User:
    """Make ``sub_account_ids`` exactly the sub accounts the agency user may open."""
    user = get_agency_user(owner, user_id)
    if user.role == Role.AGENCY_OWNER:
        raise InvalidRequest("Owners open every sub account of the agency.")
    granted = _own_sub_accounts(owner, sub_account_ids)
    if set(user.granted_sub_accounts) - set(granted):
        end_sessions(user)  # what they may open shrank: their open pages end with it
    user.granted_sub_accounts = granted
    db.session.flush()
    return user


def set_user_active(owner: User, user_id: int, active: bool) -> User:
    """Let an agency user sign in, or stop them (their sessions end at once)."""
    user = get_agency_user(owner, user_id)
    if user.id == owner.id or user.role == Role.AGENCY_OWNER:
        raise InvalidRequest("An owner cannot be deactivated here.")
    if active and user.password_hash == NO_PASSWORD:
        raise InvalidRequest(f"{user.email} has not accepted the invitation yet.")
    user.active = active
    if not active:
        end_sessions(user)
    db.session.flush()
    return user
