"""The password-reset mail through a real Celery worker and a real SMTP server (aiosmtpd), as
every other mail goes: the web request enqueues the email asked about, and the worker looks
the account up, keeps to its ceiling of links an hour, makes the link and sends it."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import MailMessage, MailStatus, PasswordReset
from app.services.accounts.password_resets import MAIL_TASK, MAX_LINKS_PER_ACCOUNT
from tests.celery_workers import celery_worker, wait_for
from tests.dashboard_users import csrf_token, owner_email
from tests.mail_servers import smtp_server
from tests.servers import MACHINE_REDIS

pytestmark = pytest.mark.slow

PUBLIC_URL = "https://calendar.example.test"
LINK = re.compile(rf"{re.escape(PUBLIC_URL)}(/reset-password/[A-Za-z0-9_-]+)")


def ask(app, address: str, email: str) -> int:
    """Post the forgot-password form from ``address``; the answer's status."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    token = csrf_token(client, "/forgot-password")
    with client.post("/forgot-password", data={"email": email, "csrf_token": token}) as answer:
        return answer.status_code


def tasks_done(log: Path) -> int:
    """How many of the worker's reset-mail tasks have succeeded, from its log."""
    return len(re.findall(rf"Task {re.escape(MAIL_TASK)}\[[0-9a-f-]+\] succeeded", log.read_text()))


def test_the_reset_mail_is_made_and_sent_by_the_worker(database_url, make_app, tenants, tmp_path):
    """A known and an unknown email: one mail, to the account, whose link works; then asked
    for again from five more addresses, the account is still mailed only its ceiling of links,
    by two worker processes at once."""
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": f"test-{uuid.uuid4().hex}"}
    with smtp_server() as (smtp_url, inbox):
        mail = {"SMTP_URL": smtp_url, "PUBLIC_URL": PUBLIC_URL}
        app = make_app(OUTBOX_DISPATCH=True, **broker, **mail)
        with app.app_context():
            owner = owner_email(tenants.create())
        log = tmp_path / "worker.log"
        with celery_worker(database_url, log, processes=2, **broker, **mail):
            assert ask(app, "198.51.100.1", owner) == 200
            assert ask(app, "198.51.100.2", "nobody@agency.test") == 200
            assert wait_for(lambda: tasks_done(log) == 2), log.read_text()
            (message,) = inbox.messages
            assert message["To"] == owner
            path = LINK.search(message.get_body(("plain",)).get_content()).group(1)
            with app.app_context():
                (kept,) = db.session.scalars(select(MailMessage)).all()
                assert (kept.kind, kept.recipient, kept.status) == (
                    "password.reset",
                    owner,
                    MailStatus.SENT,
                )
            assert app.test_client().get(path).status_code == 200  # the link opens the page

            for n in range(3, 8):
                assert ask(app, f"198.51.100.{n}", owner) == 200
            assert wait_for(lambda: tasks_done(log) == 7), log.read_text()
    assert len(inbox.to(owner)) == MAX_LINKS_PER_ACCOUNT == len(inbox.messages)
    with app.app_context():
        stored = db.session.scalar(select(func.count()).select_from(PasswordReset))
    assert stored == MAX_LINKS_PER_ACCOUNT
