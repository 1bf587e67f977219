"""Dashboard accounts: the password-reset link, made and mailed here as every other mail is
sent by the worker. The web request only enqueues the email asked about
(``app.services.accounts.password_resets.ask_for_link``), whatever it is."""

from __future__ import annotations

from celery import shared_task

from app.jobs.accounts import mail_reset_link
from app.links import public_link
from app.models.types import utcnow
from app.services.accounts.password_resets import MAIL_TASK


@shared_task(name=MAIL_TASK)
def mail_link(email: str) -> None:
    """Mail the active user whose email this is a link to choose a new password: nothing for
    an email no active user has, nor past the account's ceiling of links an hour."""
    mail_reset_link(email, now=utcnow(), link=reset_link)


def reset_link(token: str) -> str:
    """The link the mail carries: ``/reset-password/<token>`` under ``PUBLIC_URL``."""
    return public_link("auth.reset_password", token=token)
