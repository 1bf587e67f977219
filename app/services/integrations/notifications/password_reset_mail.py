"""The message carrying a password-reset link to the dashboard user who asked for it
(``app.services.accounts.password_resets`` decides when): what it is, the link, that the link
works once and for an hour, and that someone who did not ask can ignore it. A plain-text and an
HTML part (``templates/password_reset.txt`` and ``.html``).

The message is recorded in the mail log (``mail_messages``, kind ``password.reset``) under no
sub account: the link opens the account, so no sub account's mail log shows it to the people
who open that sub account. With no SMTP server configured it is kept instead of sent, as all
mail is, and read with ``flask outbox``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime

from app.config import settings as configured
from app.extensions import db
from app.services.integrations.notifications.mail_log import logged
from app.services.integrations.notifications.mailer import MailNotSent, send_mail, smtp_settings
from app.services.integrations.notifications.messages import MAIL_TEMPLATES, message_id

log = logging.getLogger(__name__)

KIND = "password.reset"
SUBJECT = "Choose a new password for the Calendar Booking dashboard"


@dataclass(frozen=True)
class ResetLink:
    """Who asked (``recipient``, the account's email), the link (absolute, one use) and how
    long it works, in words ("one hour"); ``dedupe_key`` names the link's row."""

    recipient: str
    link: str
    valid_for: str
    dedupe_key: str


def send_reset_link(reset: ResetLink, *, now: datetime) -> bool:
    """Send (or keep) the message and add it to the mail log in the caller's transaction;
    whether it left. A mail server's failure is logged, not raised: the person asks again."""
    message = compose_reset_link(reset, sender=configured().mail_from, now=now)
    try:
        status = send_mail(message, smtp_settings(configured().smtp_url))
    except MailNotSent as err:
        log.warning("password-reset mail not sent: %s", err)
        return False
    db.session.add(
        logged(
            message,
            dedupe_key=reset.dedupe_key,
            sub_account_id=None,
            kind=KIND,
            recipient=reset.recipient,
            status=status,
            created_at=now,
        )
    )
    db.session.flush()
    return True


def compose_reset_link(reset: ResetLink, *, sender: str, now: datetime) -> EmailMessage:
    context = {
        "subject": SUBJECT,
        "email": reset.recipient,
        "link": reset.link,
        "valid_for": reset.valid_for,
    }
    message = EmailMessage()
    message["Subject"] = SUBJECT
    message["From"] = sender
    message["To"] = reset.recipient
    message["Date"] = format_datetime(now)
    message["Message-ID"] = message_id(reset.dedupe_key, sender)
    message.set_content(MAIL_TEMPLATES.get_template("password_reset.txt").render(**context))
    message.add_alternative(
        MAIL_TEMPLATES.get_template("password_reset.html").render(**context), subtype="html"
    )
    return message
