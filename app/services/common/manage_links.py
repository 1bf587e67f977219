"""Each attendee's own link to see, cancel or move their booking, with no account: the link
carries a token signed with the service's ``SECRET_KEY`` (``itsdangerous``), naming the
attendee by their random ``link_key`` (not the row's sequential id, which would tell how many
attendees there are) and their link's version.

- **Unguessable**: the signature is an HMAC only the service can make; a token that was not
  made here, or was changed, opens nothing.
- **Rebuilt, not stored**: the token is the same every time it is made for one attendee and
  version, so the invitation, the reminders, the API's answers and the webhooks all carry the
  same link, and the database holds no secret that would open it.
- **Revocable**: the dashboard's "New link" raises the attendee's ``manage_link_version``; every
  earlier link of that attendee then says it was replaced.
- **Expiring**: a link works until ``LINK_LIFETIME_AFTER_END`` after the booking ends (the
  attendee can still look at a past booking for a while; nothing can be changed once it has
  started), then says it has expired. A reschedule moves the end, and the link's expiry with it.
- **Rotating the key** (``SECRET_KEY_FALLBACKS``) keeps earlier links working: they are checked
  against the earlier keys too, and every new link is signed with the current one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Protocol

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import select

from app.config import settings
from app.extensions import db
from app.models import Attendee, Booking, SubAccount
from app.services.common.errors import BookingNotFound

# The link's path under ``PUBLIC_URL`` (the attendee's page, ``app.dashboard.attendee_page``).
MANAGE_PATH = "/manage/"
# How long after the booking's end its links still open (to see it; nothing can change).
LINK_LIFETIME_AFTER_END = timedelta(days=30)
_SALT = "attendee-manage-link"


class LinkProblem(StrEnum):
    """Why a manage link opens nothing, as the attendee's page says it."""

    FORGED = "This link is not valid. Check that it was copied whole from your message."
    REVOKED = "This link has been replaced by a newer one. Use the link in your latest message."
    EXPIRED = "This link has expired: the booking it was for is long over."


class ManageLinkUnusable(Exception):
    def __init__(self, problem: LinkProblem) -> None:
        super().__init__(problem.value)
        self.problem = problem


@dataclass(frozen=True)
class OpenedLink:
    """What a usable link opens: the attendee, their booking and the booking's sub account."""

    attendee: Attendee
    booking: Booking
    sub_account: SubAccount


class LinkHolder(Protocol):
    """An attendee as a row or as the API's read of one: what their link is made of."""

    @property
    def link_key(self) -> str: ...
    @property
    def manage_link_version(self) -> int: ...


@lru_cache(maxsize=8)
def _serializer_for(keys: tuple[str, ...]) -> URLSafeSerializer:
    # itsdangerous signs with the last key and accepts any: the current key goes last.
    return URLSafeSerializer(list(reversed(keys)), salt=_SALT)


def _serializer() -> URLSafeSerializer:
    return _serializer_for(tuple(settings().secret_keys))


@lru_cache(maxsize=4096)
def _signed(link_key: str, version: int, keys: tuple[str, ...]) -> str:
    """A token, made once per process (signing is ~25 µs; a list of 100 bookings asks for 100
    links): the same inputs always give the same token."""
    return str(_serializer_for(keys).dumps([link_key, version]))


def manage_token(attendee: LinkHolder) -> str:
    """The token of ``attendee``'s current link (a flushed attendee: it needs its key)."""
    return _signed(attendee.link_key, attendee.manage_link_version, tuple(settings().secret_keys))


def manage_url(attendee: LinkHolder) -> str:
    """``attendee``'s link, absolute under ``PUBLIC_URL``."""
    return f"{settings().base_url}{MANAGE_PATH}{manage_token(attendee)}"


def open_manage_link(token: str, now: datetime) -> OpenedLink:
    """The attendee and booking ``token`` opens, or ``ManageLinkUnusable`` saying why not."""
    try:
        named, version = _serializer().loads(token)
    except (BadSignature, TypeError, ValueError):
        raise ManageLinkUnusable(LinkProblem.FORGED) from None
    if not isinstance(version, int) or isinstance(version, bool):
        raise ManageLinkUnusable(LinkProblem.FORGED)
    if isinstance(named, str):
        attendee = db.session.scalar(select(Attendee).where(Attendee.link_key == named))
    elif isinstance(named, int) and not isinstance(named, bool):
        # A link mailed before links named keys (migration 0025): signed here, so still the
        # attendee's; every link made since names the key.
        attendee = db.session.get(Attendee, named)
    else:
        raise ManageLinkUnusable(LinkProblem.FORGED)
    if attendee is None:  # removed from the booking since: the link was theirs
        raise ManageLinkUnusable(LinkProblem.REVOKED)
    if attendee.manage_link_version != version:
        raise ManageLinkUnusable(LinkProblem.REVOKED)
    booking = attendee.booking
    if booking.end_at + LINK_LIFETIME_AFTER_END <= now:
        raise ManageLinkUnusable(LinkProblem.EXPIRED)
    sub_account = db.session.get(SubAccount, booking.sub_account_id)
    assert sub_account is not None  # the booking's (a foreign key)
    if not sub_account.active:
        raise ManageLinkUnusable(LinkProblem.EXPIRED)
    return OpenedLink(attendee, booking, sub_account)


def reissue_manage_link(sub_account: SubAccount, booking_id: int, attendee_id: int) -> Attendee:
    """Give one attendee of the sub account's booking a new link; their earlier ones stop
    working. In the caller's transaction."""
    attendee = db.session.scalar(
        select(Attendee)
        .join(Booking, Booking.id == Attendee.booking_id)
        .where(
            Attendee.id == attendee_id,
            Booking.id == booking_id,
            Booking.sub_account_id == sub_account.id,
        )
    )
    if attendee is None:
        raise BookingNotFound()
    attendee.manage_link_version += 1
    db.session.flush()
    return attendee
