"""Sending one email: through the SMTP server ``SMTP_URL`` names, or, with none configured (the
embedded default), not at all: the caller keeps the message for someone to read
(``flask outbox``) instead of dropping it.

``SMTP_URL``: ``smtp://[user:password@]host[:port]`` (plain, port 25 by default),
``smtp://…?starttls=1`` (upgraded with STARTTLS, port 587), ``smtps://…`` (TLS from the start,
port 465). User and password are percent-decoded.
"""

from __future__ import annotations

import smtplib
from dataclasses import dataclass, field
from email.message import EmailMessage
from urllib.parse import parse_qs, unquote, urlsplit

from app.models import MailStatus
from app.services.common.tls import shared_tls_context

DEFAULT_TIMEOUT_SECONDS = 10.0


class MailNotSent(Exception):
    """The SMTP server could not be reached or refused the message; trying later may work."""


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int
    tls: bool  # TLS from the first byte (smtps)
    starttls: bool
    username: str | None
    password: str | None = field(repr=False)
    timeout: float = DEFAULT_TIMEOUT_SECONDS


def smtp_settings(url: str | None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> SmtpSettings | None:
    """The settings ``url`` gives, or None when it is empty (keep mail instead of sending)."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ValueError("SMTP_URL must look like smtp://user:password@host:port or smtps://…")
    tls = parts.scheme == "smtps"
    starttls = parse_qs(parts.query).get("starttls", ["0"])[0].lower() in ("1", "true", "yes")
    default_port = 465 if tls else 587 if starttls else 25
    return SmtpSettings(
        host=parts.hostname,
        port=parts.port or default_port,
        tls=tls,
        starttls=starttls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        timeout=timeout,
    )


def send_mail(message: EmailMessage, settings: SmtpSettings | None) -> MailStatus:
    """Hand ``message`` to the SMTP server (``SENT``), or with no server configured report that
    it is to be kept (``KEPT``). Raises ``MailNotSent`` when the server fails."""
    if settings is None:
        return MailStatus.KEPT
    context = shared_tls_context() if settings.tls or settings.starttls else None
    try:
        if settings.tls:
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                settings.host, settings.port, timeout=settings.timeout, context=context
            )
        else:
            client = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout)
        with client:
            if settings.starttls:
                client.starttls(context=context)
            if settings.username:
                client.login(settings.username, settings.password or "")
            client.send_message(message)
    except (smtplib.SMTPException, OSError) as err:
        reason = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        raise MailNotSent(f"{settings.host}:{settings.port}: {reason}"[:500]) from None
    return MailStatus.SENT
