"""The mail log (``MailMessage``): every message the service sent or kept, as it was composed,
and a sub account's mail for reading in the dashboard.

With no SMTP server configured (the embedded default) messages are only kept here, so this is
where a person sees what attendees would have received. ``flask outbox`` lists the same rows
across all sub accounts. ``logged`` is the one place a composed message becomes its row;
``keep_regardless`` keeps a row whatever becomes of the caller's transaction.
"""

from __future__ import annotations

from email.message import EmailMessage
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.database import session_apart
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


def logged(message: EmailMessage, **fields: Any) -> MailMessage:
    """The mail log's row of ``message`` (its subject, Message-ID and both parts) with
    ``fields`` (dedupe key, kind, recipient, status, …)."""
    text_body, html_body = message.get_body(("plain",)), message.get_body(("html",))
    assert text_body is not None and html_body is not None  # every message has both parts
    return MailMessage(
        subject=str(message["Subject"]),
        message_id=str(message["Message-ID"]),
        text_body=text_body.get_content(),
        html_body=html_body.get_content(),
        **fields,
    )


def keep_regardless(row: MailMessage) -> None:
    """Add ``row`` to the mail log in a session of its own: the record of what was sent stays
    whatever becomes of the caller's transaction (a record kept regardless). One recorded
    meanwhile under the same dedupe key (a concurrent run) is left as it is."""
    try:
        with session_apart(db.engine) as session:
            session.add(row)
    except IntegrityError:
        pass  # recorded meanwhile under the same dedupe key
