"""The message telling a sub account's people that one of its calendar connections needs them
(``app.services.integrations.calendars.health`` decides when): which connection, what
happened, what to do, and a link to the connection's page. A plain-text and an HTML part
(``templates/connection_needs_action.txt`` and ``.html``).

Each message is recorded (``mail_messages``, kind ``connection.needs_action``) under a key
that names the connection, the spell of failure and the recipient, and a message whose key is
recorded is never sent again; with no SMTP server configured it is kept instead, for ``flask
outbox`` and the dashboard's mail log, as booking mail is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import settings as configured
from app.extensions import db
from app.models import MailMessage
from app.services.integrations.notifications.mail_log import keep_regardless, logged
from app.services.integrations.notifications.mailer import MailNotSent, send_mail, smtp_settings
from app.services.integrations.notifications.messages import (
    MAIL_TEMPLATES,
    address,
    message_id,
)

log = logging.getLogger(__name__)

KIND = "connection.needs_action"


@dataclass(frozen=True)
class ConnectionNotice:
    """What the message says: the connection (``connection_name``) of the sub account, what
    happened (``problem``: the sync's error), what to do (``action``, in words: "reconnect")
    and where (``link``: the connection's dashboard page, absolute)."""

    sub_account_id: int
    sub_account_name: str
    connection_name: str
    problem: str
    action: str
    link: str


def send_notice(
    notice: ConnectionNotice,
    recipients: list[str],
    *,
    now: datetime,
    key: Callable[[str], str],
) -> list[str]:
    """Send (or keep) the notice to each of ``recipients`` whose message (recorded under
    ``key(address)``) was not sent before; returns what failed, as messages (those recipients
    are tried again at the next call)."""
    keys = {email: key(email) for email in recipients}
    with Session(db.engine) as session:
        sent = set(
            session.scalars(
                select(MailMessage.dedupe_key).where(MailMessage.dedupe_key.in_(keys.values()))
            )
        )
    settings = smtp_settings(configured().smtp_url)
    sender = configured().mail_from
    failures = []
    for email, dedupe_key in keys.items():
        if dedupe_key in sent:
            continue
        message = compose_notice(notice, email, sender=sender, now=now, dedupe_key=dedupe_key)
        try:
            status = send_mail(message, settings)
        except MailNotSent as err:
            log.warning("mail to %s not sent: %s", email, err)
            failures.append(f"{email}: {err}")
            continue
        keep_regardless(
            logged(
                message,
                dedupe_key=dedupe_key,
                sub_account_id=notice.sub_account_id,
                kind=KIND,
                recipient=email,
                status=status,
                created_at=now,
            )
        )
    return failures


def compose_notice(
    notice: ConnectionNotice, recipient: str, *, sender: str, now: datetime, dedupe_key: str
) -> EmailMessage:
    subject = f"Action needed for {notice.connection_name}: {notice.action}"
    context = {
        "subject": subject,
        "connection_name": notice.connection_name,
        "sub_account_name": notice.sub_account_name,
        "problem": notice.problem,
        "action": notice.action,
        "link": notice.link,
        "sender_name": notice.sub_account_name,
    }
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = str(
        Address(display_name=notice.sub_account_name, addr_spec=address(sender).addr_spec)
    )
    message["To"] = recipient
    message["Date"] = format_datetime(now)
    message["Message-ID"] = message_id(dedupe_key, sender)
    message.set_content(
        MAIL_TEMPLATES.get_template("connection_needs_action.txt").render(**context)
    )
    html = MAIL_TEMPLATES.get_template("connection_needs_action.html").render(**context)
    message.add_alternative(html, subtype="html")
    return message
