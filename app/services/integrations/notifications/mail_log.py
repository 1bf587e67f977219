"""The mail a sub account's calendar sent or kept, for reading in the dashboard.

With no SMTP server configured (the embedded default) messages are only kept here, so this is
where a person sees what attendees would have received. ``flask outbox`` lists the same rows
across all sub accounts.
"""

from __future__ import annotations

from sqlalchemy import func, select

from app.extensions import db
from app.models import MailMessage, SubAccount
from app.services.common.errors import NotFound
from app.services.common.lookups import find_owned


class MailMessageNotFound(NotFound):
    message = "Mail message not found"


def list_mail(sub_account: SubAccount, *, limit: int, offset: int) -> tuple[list[MailMessage], int]:
    """A page of the sub account's messages, newest first, and how many there are."""
    mine = MailMessage.sub_account_id == sub_account.id
    total = db.session.scalar(select(func.count()).select_from(MailMessage).where(mine)) or 0
    page = db.session.scalars(
        select(MailMessage)
        .where(mine)
        .order_by(MailMessage.created_at.desc(), MailMessage.id.desc())
        .limit(limit)
        .offset(offset)
    )
    return list(page), total


def get_mail(sub_account: SubAccount, message_id: int) -> MailMessage:
    """The message, if it is ``sub_account``'s: another sub account's does not exist here."""
    return find_owned(MailMessage, sub_account, message_id, MailMessageNotFound)
