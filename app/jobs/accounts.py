"""A password-reset link made and mailed (``app.services.accounts.password_resets``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from app.extensions import db
from app.services.accounts.password_resets import make_reset_link
from app.services.integrations.notifications.password_reset_mail import send_reset_link


def mail_reset_link(email: str, *, now: datetime, link: Callable[[str], str]) -> None:
    """Mail the active user whose email is ``email`` a link to choose a new password, if they
    may have one more (``make_reset_link``). The link's row is committed before the mail server
    is waited on; what was sent is kept in the mail log. The worker's task (``MAIL_TASK``)."""
    message = make_reset_link(email, now=now, link=link)
    db.session.commit()
    if message is not None:
        send_reset_link(message, now=now)
        db.session.commit()
