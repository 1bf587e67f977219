"""Dashboard sessions end when they are ended: a cookie copied before signing out opens
nothing after, a password change signs the user's other sessions out, and an owner deactivating
a user or taking a grant away signs that user out at once."""

from __future__ import annotations

import os
import re

import httpx
import pytest

from app.extensions import db
from app.models import DashboardSession
from tests.dashboard_users import PASSWORD, agency_user, csrf_token, owner_email, sign_in
from tests.factories import make_sub_account
from tests.servers import gunicorn, migrate_and_run_demo

HOME = "/dashboard/"


def copy_of_session(app, client):
    """Another client holding a copy of ``client``'s session cookie."""
    other = app.test_client()
    other.set_cookie("session", client.get_cookie("session").value)
    return other


def opens_dashboard(client, path: str = HOME) -> bool:
    return client.get(path, follow_redirects=True).request.path != "/login"


def sign_out(client) -> None:
    client.post("/logout", data={"csrf_token": csrf_token(client, "/dashboard/password")})


def change_password(client, new: str):
    token = csrf_token(client, "/dashboard/password")
    return client.post(
        "/dashboard/password",
        data={"current_password": PASSWORD, "new_password": new, "csrf_token": token},
    )


def test_a_cookie_copied_before_sign_out_opens_nothing_after(app, client, tenant):
    sign_in(client, owner_email(tenant))
    copied = copy_of_session(app, client)
    assert opens_dashboard(copied)
    sign_out(client)
    assert not opens_dashboard(copied)


def test_signing_out_ends_only_that_session(app, tenant):
    laptop, phone = app.test_client(), app.test_client()
    sign_in(laptop, owner_email(tenant))
    sign_in(phone, owner_email(tenant))
    sign_out(laptop)
    assert not opens_dashboard(laptop)
    assert opens_dashboard(phone)


def test_a_password_change_signs_the_users_other_sessions_out(app, tenant):
    here, elsewhere = app.test_client(), app.test_client()
    sign_in(here, owner_email(tenant))
    sign_in(elsewhere, owner_email(tenant))
    assert change_password(here, "a-long-new-pass").status_code == 302
    assert opens_dashboard(here)
    assert not opens_dashboard(elsewhere)


def test_a_refused_password_change_signs_nobody_out(app, tenant):
    here, elsewhere = app.test_client(), app.test_client()
    sign_in(here, owner_email(tenant))
    sign_in(elsewhere, owner_email(tenant))
    assert change_password(here, "short").status_code == 200
    assert opens_dashboard(elsewhere)


def test_a_deactivated_user_stays_signed_out_when_reactivated(app, client, tenant):
    helper = agency_user(tenant, tenant.sub_account_id)
    theirs = app.test_client()
    sign_in(theirs, helper.email)
    sign_in(client, owner_email(tenant))
    page = f"/dashboard/team/users/{helper.id}"
    client.post(f"{page}/deactivate", data={"csrf_token": csrf_token(client, page)})
    client.post(f"{page}/activate", data={"csrf_token": csrf_token(client, page)})
    assert not opens_dashboard(theirs)
    assert db.session.query(DashboardSession).filter_by(user_id=helper.id).count() == 0


def test_taking_a_grant_away_signs_the_user_out(app, client, tenant):
    second = make_sub_account(tenant, "Second")
    helper = agency_user(tenant, tenant.sub_account_id, second.id)
    theirs = app.test_client()
    sign_in(theirs, helper.email)
    assert opens_dashboard(theirs, f"/dashboard/s/{second.id}/")
    sign_in(client, owner_email(tenant))
    page = f"/dashboard/team/users/{helper.id}"
    kept = {"sub_accounts": [str(tenant.sub_account_id)], "csrf_token": csrf_token(client, page)}
    client.post(page, data=kept)
    assert not opens_dashboard(theirs)


def test_granting_more_keeps_the_user_signed_in(app, client, tenant):
    second = make_sub_account(tenant, "Second")
    helper = agency_user(tenant, tenant.sub_account_id)
    theirs = app.test_client()
    sign_in(theirs, helper.email)
    sign_in(client, owner_email(tenant))
    page = f"/dashboard/team/users/{helper.id}"
    both = [str(tenant.sub_account_id), str(second.id)]
    client.post(page, data={"sub_accounts": both, "csrf_token": csrf_token(client, page)})
    assert opens_dashboard(theirs, f"/dashboard/s/{second.id}/")


def test_a_session_the_server_does_not_know_opens_nothing(app, client, tenant):
    """A cookie signed with the right key but naming no stored session (one from before
    sessions were kept, or forged from a leaked key without the database)."""
    sign_in(client, owner_email(tenant))
    db.session.query(DashboardSession).delete()
    db.session.commit()
    assert not opens_dashboard(client)


def test_only_a_digest_of_the_session_token_is_stored(app, client, tenant):
    sign_in(client, owner_email(tenant))
    stored = db.session.query(DashboardSession).one()
    cookie = client.get_cookie("session").value
    assert len(stored.token_digest) == 64
    assert stored.token_digest not in cookie


@pytest.mark.slow
def test_a_copied_cookie_is_refused_by_every_server_process_after_sign_out(postgres_database):
    """Over real HTTP, against two gunicorn workers: the copy is refused whichever answers."""
    database_url = postgres_database()
    demo = migrate_and_run_demo({**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "s"})
    with gunicorn(database_url, workers=2) as base:
        with httpx.Client(base_url=base, timeout=10) as browser:
            login = browser.get("/login").text
            token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', login).group(1)
            signed_in = browser.post(
                "/login",
                data={"email": demo.email, "password": demo.password, "csrf_token": token},
            )
            assert signed_in.status_code == 302
            copied = browser.cookies["session"]
            page = browser.get(HOME, follow_redirects=True).text
            sign_out_token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
            assert browser.post("/logout", data={"csrf_token": sign_out_token}).status_code == 302
        with httpx.Client(base_url=base, timeout=10, cookies={"session": copied}) as thief:
            answers = [thief.get(HOME) for _ in range(6)]
    assert [a.status_code for a in answers] == [302] * 6
    assert all(a.headers["Location"].startswith("/login") for a in answers)
