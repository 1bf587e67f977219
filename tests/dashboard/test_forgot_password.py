"""Forgot password: ``/forgot-password`` mails a one-time link to
``{PUBLIC_URL}/reset-password/<token>``, valid one hour and used once; using it sets a new
password and ends the user's other sessions. The answer is the same whether the email belongs
to an account or not, throttled or not, and so is the request's work: it hands the email to the
worker, which makes and mails the link. Asking is throttled as signing in is. With no SMTP
server (the embedded default) the mail is kept, for ``flask outbox``.

The worker's task runs in-process here, in a context of its own as in a worker
(``run_the_worker``); tests/worker/test_worker_password_reset.py runs it in a real worker."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import time_machine
from sqlalchemy import event

from app.extensions import db
from app.logs import masked
from app.models import MailMessage, MailStatus, PasswordReset, User
from app.services.accounts.password_resets import MAIL_TASK, MAX_LINKS_PER_ACCOUNT
from app.services.common.tokens import token_digest
from app.services.integrations.registry import app_registry
from tests.dashboard_users import PASSWORD, agency_user, csrf_token, owner_email, sign_in
from tests.mail_servers import smtp_server
from tests.servers import gunicorn, migrate_and_run_demo
from worker.tasks.accounts import mail_link

NEW_PASSWORD = "a-fresh-long-pass"
LINK = re.compile(r"(https?://[^/\s]+)(/\S*?reset-password/[A-Za-z0-9_-]+)")
CSRF_VALUE = re.compile(r'(name="csrf_token" type="hidden" value=)"[^"]*"')
# A fixed instant for the tests that travel past the link's hour (not today's date).
ASKED_AT = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)


def client_at(app, address: str):
    """A browser at ``address`` (loopback addresses: only the WSGI environ says them)."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


HANDED_OVER = "test_handed_over"


def handed_over(app) -> list[tuple[str, list]]:
    """The tasks ``app`` hands to the worker, in order: recorded instead of published (the
    tests' apps have no worker)."""
    if HANDED_OVER not in app.extensions:
        tasks = app.extensions[HANDED_OVER] = []
        app_registry(app).set_task_dispatcher(lambda task, args, _: tasks.append((task, args)))
    return app.extensions[HANDED_OVER]


def run_the_worker(app) -> None:
    """Run each task enqueued so far as the worker does: the task's body, in an app context
    (and so a database session) of its own."""
    tasks = handed_over(app)
    while tasks:
        task, args = tasks.pop(0)
        assert task == MAIL_TASK
        with app.app_context():
            mail_link.run(*args)


def ask_for_link(client, email: str) -> tuple[int, str]:
    """Post the forgot-password form; the answer's status and page. Then the worker runs what
    the request handed it: the link is mailed then."""
    handed_over(client.application)
    token = csrf_token(client, "/forgot-password")
    data = {"email": email, "csrf_token": token}
    with client.post("/forgot-password", data=data) as response:
        answer = response.status_code, response.get_data(as_text=True)
    run_the_worker(client.application)
    return answer


@contextmanager
def statements_run() -> Iterator[list[str]]:
    """The SQL statements run on the database meanwhile, with their parameters."""
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(f"{statement} {parameters!r}")

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def reset_mail(email: str) -> list[MailMessage]:
    db.session.expire_all()
    return list(db.session.query(MailMessage).filter_by(kind="password.reset", recipient=email))


def mailed_link(email: str) -> str:
    """The path of the link in the latest reset mail to ``email``."""
    (*_, message) = reset_mail(email)
    return LINK.search(message.text_body).group(2)


def choose_password(client, path: str, password: str = NEW_PASSWORD):
    data = {"password": password, "csrf_token": csrf_token(client, path)}
    return client.post(path, data=data)


def opens_dashboard(client) -> bool:
    return client.get("/dashboard/", follow_redirects=True).request.path != "/login"


# Asking


def test_the_sign_in_page_links_to_forgot_password(client):
    page = client.get("/login").get_data(as_text=True)
    assert 'href="/forgot-password"' in page
    assert "Forgot your password?" in page


def test_asking_for_a_link_keeps_a_mail_to_the_account(client, tenant):
    owner = owner_email(tenant)
    status, _ = ask_for_link(client, owner)
    (message,) = reset_mail(owner)
    assert status == 200
    assert message.status == MailStatus.KEPT
    assert message.sub_account_id is None


def test_the_link_is_the_public_urls_reset_password_page(make_app, tenants):
    app = make_app(PUBLIC_URL="https://calendar.example.test/base")
    with app.app_context():
        owner = owner_email(tenants.create())
        asker = app.test_client()
        asker.environ_base["HTTP_HOST"] = "evil.test"  # every request names it
        ask_for_link(asker, owner)
        (message,) = reset_mail(owner)
    found = LINK.search(message.text_body)
    assert found.group(1) == "https://calendar.example.test"
    assert found.group(2).startswith("/base/reset-password/")
    assert "evil.test" not in message.text_body + message.html_body


def test_the_mail_says_what_it_is_that_the_link_works_once_for_an_hour_and_can_be_ignored(
    client, tenant
):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    (message,) = reset_mail(owner)
    for body in (message.text_body, message.html_body):
        assert "new password" in body
        assert "works once, for one hour" in body
        assert "If you did not ask for it, ignore this message" in body
        assert LINK.search(body)
    assert "password" in message.subject.lower()


def test_the_email_is_matched_whatever_its_case_and_spaces(client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, f"  {owner.upper()} ")
    assert len(reset_mail(owner)) == 1


def test_an_unknown_email_gets_no_mail(client, tenant):
    ask_for_link(client, "nobody@example.test")
    db.session.expire_all()
    assert db.session.query(MailMessage).count() == 0
    assert db.session.query(PasswordReset).count() == 0


def test_a_deactivated_user_gets_no_mail(client, tenant):
    helper = agency_user(tenant, tenant.sub_account_id)
    helper.active = False
    db.session.commit()
    ask_for_link(client, helper.email)
    assert reset_mail(helper.email) == []


def test_the_answer_is_the_same_for_a_known_and_an_unknown_email(app, tenant):
    owner = owner_email(tenant)
    unknown = "nobody@agency.test"
    known_status, known_page = ask_for_link(client_at(app, "127.0.0.2"), owner)
    unknown_status, unknown_page = ask_for_link(client_at(app, "127.0.0.3"), unknown)
    assert known_status == unknown_status == 200
    assert known_page.replace(owner, "EMAIL") == unknown_page.replace(unknown, "EMAIL")


def test_the_request_hands_the_email_to_the_worker_which_makes_and_mails_the_link(
    app, client, tenant
):
    """Answered, the request has made no link and sent no mail: the worker does both."""
    owner, tasks = owner_email(tenant), handed_over(app)
    token = csrf_token(client, "/forgot-password")
    with client.post("/forgot-password", data={"email": f" {owner.upper()}", "csrf_token": token}):
        pass
    assert tasks == [(MAIL_TASK, [owner])]  # the email, never a token
    assert reset_mail(owner) == []
    assert db.session.query(PasswordReset).count() == 0
    run_the_worker(app)
    assert len(reset_mail(owner)) == 1


def test_a_known_and_an_unknown_email_make_the_request_do_the_same_work(app, tenant):
    """Whether an account has the email or not, the request runs the same statements on the
    database (none: it looks nothing up, writes nothing) and hands the worker the same one task
    carrying the email as asked: nothing of its work, and so of its time, depends on the
    account."""
    owner, unknown = owner_email(tenant), "nobody@agency.test"
    work = {}
    for email, address in ((owner, "127.0.0.2"), (unknown, "127.0.0.3")):
        asker = client_at(app, address)
        token = csrf_token(asker, "/forgot-password")
        handed_over(app).clear()
        with statements_run() as statements:
            data = {"email": email, "csrf_token": token}
            with asker.post("/forgot-password", data=data) as answer:
                assert answer.status_code == 200
        work[email] = (statements, list(handed_over(app)))
    assert work[owner] == ([], [(MAIL_TASK, [owner])])
    assert work[unknown] == ([], [(MAIL_TASK, [unknown])])


def test_only_a_digest_of_the_token_is_stored(client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    token = mailed_link(owner).rsplit("/", 1)[1]
    stored = db.session.query(PasswordReset).one()
    assert stored.token_digest == token_digest(token)
    assert token not in stored.token_digest


def test_the_reset_mail_is_in_no_sub_accounts_mail_log(signed_in, tenant):
    owner = owner_email(tenant)
    ask_for_link(signed_in.application.test_client(), owner)
    page = signed_in.get(f"/dashboard/s/{tenant.sub_account_id}/notifications")
    (message,) = reset_mail(owner)
    assert "0 messages" in page.get_data(as_text=True)
    mail_page = f"/dashboard/s/{tenant.sub_account_id}/notifications/mail/{message.id}"
    assert signed_in.get(mail_page).status_code == 404


def test_flask_outbox_shows_the_kept_reset_mail(app, client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    (message,) = reset_mail(owner)
    listed = app.test_cli_runner().invoke(args=["outbox"])
    shown = app.test_cli_runner().invoke(args=["outbox", "--show", str(message.id)])
    assert '"kind": "password.reset"' in listed.output
    assert mailed_link(owner) in shown.output


def test_with_an_smtp_server_the_link_is_sent(make_app, tenants):
    with smtp_server() as (smtp_url, inbox):
        app = make_app(SMTP_URL=smtp_url)
        with app.app_context():
            owner = owner_email(tenants.create())
            ask_for_link(app.test_client(), owner)
            (message,) = inbox.wait_for(1)
            (kept,) = reset_mail(owner)
    assert message["To"] == owner
    assert LINK.search(message.get_body(("plain",)).get_content()).group(2) == (
        LINK.search(kept.text_body).group(2)
    )
    assert kept.status == MailStatus.SENT


def test_a_mail_server_that_refuses_still_gets_the_same_answer(make_app, tenants):
    with smtp_server() as (smtp_url, inbox):
        inbox.refuse = True
        app = make_app(SMTP_URL=smtp_url)
        with app.app_context():
            owner = owner_email(tenants.create())
            status, page = ask_for_link(app.test_client(), owner)
            assert reset_mail(owner) == []
    assert status == 200
    assert "Check your mail" in page


def test_a_form_without_its_csrf_token_is_refused(app, client, tenant):
    tasks = handed_over(app)
    response = client.post("/forgot-password", data={"email": owner_email(tenant)})
    response.close()
    assert response.status_code == 400
    assert tasks == []


# Using the link


def test_the_link_sets_the_new_password_and_signs_in(client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    answer = choose_password(client, mailed_link(owner))
    assert answer.status_code == 302
    assert opens_dashboard(client)
    assert sign_in(client.application.test_client(), owner, NEW_PASSWORD).status_code == 302


def test_the_old_password_stops_working_after_a_reset(app, client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    choose_password(client, mailed_link(owner))
    assert sign_in(app.test_client(), owner, PASSWORD).status_code == 200


def test_a_reset_ends_the_users_other_sessions(app, client, tenant):
    owner = owner_email(tenant)
    elsewhere = app.test_client()
    sign_in(elsewhere, owner)
    assert opens_dashboard(elsewhere)
    ask_for_link(client, owner)
    choose_password(client, mailed_link(owner))
    assert not opens_dashboard(elsewhere)
    assert opens_dashboard(client)


def test_a_link_works_once(app, client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    link = mailed_link(owner)
    choose_password(client, link)
    again = app.test_client().get(link)
    page = again.get_data(as_text=True)
    assert again.status_code == 404
    assert "used already" in page
    assert 'href="/forgot-password"' in page


def test_a_used_link_sets_no_password(app, client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    link = mailed_link(owner)
    other = app.test_client()
    form_token = csrf_token(other, link)
    choose_password(client, link)
    late = other.post(link, data={"password": "another-long-pass", "csrf_token": form_token})
    assert late.status_code == 404
    assert sign_in(app.test_client(), owner, NEW_PASSWORD).status_code == 302


def test_a_link_expires_after_one_hour(app, client, tenant):
    owner = owner_email(tenant)
    with time_machine.travel(ASKED_AT, tick=False) as traveller:
        ask_for_link(client, owner)
        traveller.shift(timedelta(hours=1))
        expired = app.test_client().get(mailed_link(owner))
    page = expired.get_data(as_text=True)
    assert expired.status_code == 404
    assert "expired" in page
    assert 'href="/forgot-password"' in page


def test_a_link_works_until_its_hour_is_up(app, client, tenant):
    owner = owner_email(tenant)
    with time_machine.travel(ASKED_AT, tick=False) as traveller:
        ask_for_link(client, owner)
        traveller.shift(timedelta(minutes=59))
        answer = choose_password(app.test_client(), mailed_link(owner))
    assert answer.status_code == 302


def test_a_short_password_is_refused_and_the_link_still_works(app, client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    link = mailed_link(owner)
    refused = choose_password(client, link, "short")
    assert refused.status_code == 200
    assert "Use at least 10 characters." in refused.get_data(as_text=True)
    assert choose_password(client, link).status_code == 302


def test_using_one_link_voids_the_users_other_links(app, tenant):
    owner = owner_email(tenant)
    ask_for_link(client_at(app, "127.0.0.2"), owner)
    ask_for_link(client_at(app, "127.0.0.3"), owner)
    first, second = (LINK.search(m.text_body).group(2) for m in reset_mail(owner))
    choose_password(app.test_client(), second)
    assert app.test_client().get(first).status_code == 404


def test_an_unknown_link_is_not_found(client):
    assert client.get("/reset-password/not-a-token").status_code == 404


def test_the_reset_page_is_not_cached(client, tenant):
    owner = owner_email(tenant)
    ask_for_link(client, owner)
    assert client.get(mailed_link(owner)).headers["Cache-Control"] == "no-store"


def test_the_link_of_a_user_deactivated_since_does_not_work(client, tenant):
    helper = agency_user(tenant, tenant.sub_account_id)
    ask_for_link(client, helper.email)
    link = mailed_link(helper.email)
    db.session.get(User, helper.id).active = False
    db.session.commit()
    assert client.get(link).status_code == 404


def test_a_reset_link_in_a_log_line_is_masked():
    line = masked("GET /reset-password/SeCrEtToKeN 200")
    assert "SeCrEtToKeN" not in line
    assert "/reset-password/" in line


# Throttling


def test_asking_is_refused_after_five_requests_for_one_account_from_one_address(app, tenant):
    asker = client_at(app, "127.0.0.2")
    owner = owner_email(tenant)
    assert [ask_for_link(asker, owner)[0] for _ in range(5)] == [200] * 5
    assert ask_for_link(asker, owner)[0] == 429
    assert len(reset_mail(owner)) == MAX_LINKS_PER_ACCOUNT  # the mail's own ceiling, below five


def test_a_throttled_answer_is_the_same_for_a_known_and_an_unknown_email(app, tenant):
    owner, unknown = owner_email(tenant), "nobody@agency.test"
    answers = {}
    for email, address in ((owner, "127.0.0.2"), (unknown, "127.0.0.3")):
        asker = client_at(app, address)
        for _ in range(5):
            ask_for_link(asker, email)
        status, page = ask_for_link(asker, email)
        answers[email] = (status, CSRF_VALUE.sub(r"\1", page.replace(email, "EMAIL")))
    assert answers[owner] == answers[unknown]
    assert answers[owner][0] == 429


def test_asking_about_many_emails_from_one_address_is_refused(app, tenant):
    asker = client_at(app, "127.0.0.2")
    for n in range(20):
        ask_for_link(asker, f"nobody{n}@example.test")
    assert ask_for_link(asker, owner_email(tenant))[0] == 429
    assert reset_mail(owner_email(tenant)) == []


def test_failed_sign_ins_do_not_stop_asking_for_a_link(app, tenant):
    browser = client_at(app, "127.0.0.2")
    owner = owner_email(tenant)
    for _ in range(6):
        sign_in(browser, owner, "wrong")
    assert ask_for_link(browser, owner)[0] == 200


@pytest.fixture
def low_account_ceiling(make_app):
    """An app whose per-account ceiling on asking is 3 an hour."""
    app = make_app(FORGOT_PASSWORD_LIMIT_PER_ACCOUNT="3/hour")
    with app.app_context():
        yield app


def test_over_the_account_ceiling_addresses_that_asked_are_refused(low_account_ceiling, tenants):
    app = low_account_ceiling
    owner = owner_email(tenants.create())
    spread = [client_at(app, f"127.0.1.{n}") for n in range(1, 4)]
    assert [ask_for_link(asker, owner)[0] for asker in spread] == [200] * 3
    assert ask_for_link(spread[0], owner)[0] == 429


@pytest.mark.slow
def test_over_real_http_the_answer_does_not_wait_for_a_hung_mail_server(postgres_database):
    """gunicorn's gevent workers on PostgreSQL, the SMTP server a socket that never answers:
    the known email is answered at once, as an unknown one is; the web process never waits on
    the mail server (the mail is the worker's)."""
    database_url = postgres_database()
    demo = migrate_and_run_demo({**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "s"})
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        smtp_url = f"smtp://127.0.0.1:{hung.getsockname()[1]}"
        with gunicorn(database_url, workers=2, env={"SMTP_URL": smtp_url}) as base:
            answers = [ask_over_http(base, email) for email in (demo.email, "nobody@x.test")]
    assert [status for status, _ in answers] == [200, 200]
    assert all(seconds < 3 for _, seconds in answers)


def ask_over_http(base: str, email: str) -> tuple[int, float]:
    with httpx.Client(base_url=base, timeout=30) as browser:
        page = browser.get("/forgot-password").text
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
        started = time.monotonic()
        answer = browser.post("/forgot-password", data={"email": email, "csrf_token": token})
        return answer.status_code, time.monotonic() - started


def test_one_account_is_mailed_at_most_three_links_an_hour_whatever_the_addresses(app, tenant):
    owner = owner_email(tenant)
    for n in range(6):  # each from an address of its own: the throttle's per-address counts
        assert ask_for_link(client_at(app, f"198.51.100.{n + 1}"), owner)[0] == 200
    assert len(reset_mail(owner)) == MAX_LINKS_PER_ACCOUNT == 3


def test_the_ceiling_holds_for_requests_the_worker_handles_at_once(app, tenant):
    """Eight of one account's requests run by the worker at the same moment (its processes,
    here threads): each holds the account while it counts, so only three links are made."""
    owner = owner_email(tenant)
    db.session.remove()  # the test's session holds nothing the jobs wait for
    start = threading.Barrier(8)
    failures: list[BaseException] = []

    def job() -> None:
        with app.app_context():
            start.wait()
            try:
                mail_link.run(owner)
            except BaseException as failure:
                failures.append(failure)

    jobs = [threading.Thread(target=job) for _ in range(8)]
    for each in jobs:
        each.start()
    for each in jobs:
        each.join()
    assert failures == []
    assert db.session.query(PasswordReset).count() == MAX_LINKS_PER_ACCOUNT
    assert len(reset_mail(owner)) == MAX_LINKS_PER_ACCOUNT
