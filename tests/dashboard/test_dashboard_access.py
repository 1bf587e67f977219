"""Signing in to the dashboard, and who may see what: CSRF on every form, session cookies and
their expiry, sign-in throttling, roles, and other agencies' data by direct URL (404)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
import time_machine

from app.extensions import db
from app.models import SubAccount
from tests.dashboard_users import PASSWORD, agency_user, csrf_token, owner_email, sign_in
from tests.factories import make_sub_account


@pytest.fixture
def owner(tenant):
    return owner_email(tenant)


def test_the_root_leads_to_sign_in_then_to_the_dashboard(client, tenant, owner):
    assert client.get("/").headers["Location"] == "/login"
    sign_in(client, owner)
    assert client.get("/").headers["Location"] == "/dashboard/"


def test_an_owner_signs_in_and_sees_their_sub_account(client, tenant, owner):
    response = sign_in(client, owner)
    assert response.status_code == 302 and response.headers["Location"] == "/dashboard/"
    home = client.get("/dashboard/", follow_redirects=True)
    assert home.status_code == 200
    name = db.session.get(SubAccount, tenant.sub_account_id).name
    assert f"<h1>{name}</h1>" in home.get_data(as_text=True)


def test_a_wrong_password_is_refused_in_words(client, tenant, owner):
    response = sign_in(client, owner, "not the password")
    assert response.status_code == 200
    assert "The email or the password is wrong." in response.get_data(as_text=True)
    assert client.get("/dashboard/").headers["Location"].startswith("/login")


def test_a_sign_in_without_its_csrf_token_is_refused(client, tenant, owner):
    response = client.post("/login", data={"email": owner, "password": PASSWORD})
    assert response.status_code == 400
    assert "did not come from this site" in response.get_data(as_text=True)
    assert client.get("/dashboard/").status_code == 302


def test_signing_out_needs_a_post_with_its_token(client, tenant, owner):
    sign_in(client, owner)
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 400  # no token: still signed in
    assert client.get("/dashboard/", follow_redirects=True).status_code == 200
    token = csrf_token(client, "/dashboard/password")
    assert client.post("/logout", data={"csrf_token": token}).headers["Location"] == "/login"
    assert client.get("/dashboard/").headers["Location"].startswith("/login")


def sign_in_then(client, email: str, next_target: str):
    """Sign in from ``/login?next=<next_target>`` (sent as the raw query string)."""
    token = csrf_token(client, "/login")
    return client.post(
        "/login",
        query_string=f"next={next_target}",
        data={"email": email, "password": PASSWORD, "csrf_token": token},
    )


@pytest.mark.parametrize(
    "next_target",
    [
        "/%09/evil.test",  # a tab, dropped by browsers: //evil.test
        "/%0a/evil.test",
        "/%0d/evil.test",
        "%09//evil.test",
        "%20//evil.test",
        "//evil.test",
        "///evil.test",
        "/\\evil.test",
        "/%5Cevil.test",
        "\\evil.test",
        "/%2F/evil.test",
        "/%2F%2Fevil.test",
        "https://evil.test/",
        "https:evil.test",
        "javascript:alert(1)",
        "evil.test",
        "/%00/evil.test",
    ],
)
def test_sign_in_never_redirects_off_the_site(client, tenant, owner, next_target):
    response = sign_in_then(client, owner, next_target)
    assert (response.status_code, response.headers["Location"]) == (302, "/dashboard/")


def test_sign_in_returns_to_the_page_that_asked_for_it(client, tenant, owner):
    response = sign_in_then(client, owner, "/dashboard/password%3Ftab%3D1")
    assert response.headers["Location"] == "/dashboard/password?tab=1"


def test_a_page_asked_for_while_signed_out_is_where_sign_in_leads(client, tenant, owner):
    asked = client.get("/dashboard/password")
    login = asked.headers["Location"]
    assert login.startswith("/login?next=")
    token = csrf_token(client, "/login")
    response = client.post(login, data={"email": owner, "password": PASSWORD, "csrf_token": token})
    assert response.headers["Location"] == "/dashboard/password"


def test_the_session_cookie_is_http_only_and_same_site(client, tenant, owner):
    cookie = sign_in(client, owner).headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie


def test_the_session_cookie_is_secure_in_production(make_app):
    app = make_app(
        APP_ENV="production",
        REDIS_URL="redis://127.0.0.1:6379/0",
        PUBLIC_URL="https://calendar.example.test",
    )
    assert app.config["SESSION_COOKIE_SECURE"] is True


def test_a_session_expires(client, tenant, owner):
    sign_in(client, owner)
    assert client.get("/dashboard/", follow_redirects=True).status_code == 200
    with time_machine.travel(datetime.now() + timedelta(hours=12, minutes=1)):
        assert client.get("/dashboard/").headers["Location"].startswith("/login")


def test_sign_in_is_throttled_per_account(client, tenant, owner):
    for _ in range(5):
        assert sign_in(client, owner, "wrong").status_code == 200
    refused = sign_in(client, owner)  # even the right password, for now
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.get_data(as_text=True)


def test_sign_in_is_throttled_per_address(client, tenants):
    for n in range(20):
        sign_in(client, f"nobody{n}@example.test", "wrong")
    other = owner_email(tenants.create())
    assert sign_in(client, other).status_code == 429


def test_a_password_change_needs_the_current_one(client, tenant, owner):
    sign_in(client, owner)
    token = csrf_token(client, "/dashboard/password")
    wrong = client.post(
        "/dashboard/password",
        data={"current_password": "nope", "new_password": "a-long-new-pass", "csrf_token": token},
    )
    assert "This is not your current password." in wrong.get_data(as_text=True)
    short = client.post(
        "/dashboard/password",
        data={"current_password": PASSWORD, "new_password": "short", "csrf_token": token},
    )
    assert "Use at least 10 characters." in short.get_data(as_text=True)
    changed = client.post(
        "/dashboard/password",
        data={"current_password": PASSWORD, "new_password": "a-long-new-pass", "csrf_token": token},
    )
    assert changed.status_code == 302
    client.post("/logout", data={"csrf_token": csrf_token(client, "/dashboard/password")})
    assert sign_in(client, owner, "a-long-new-pass").status_code == 302


def test_a_new_password_field_states_its_rule_before_the_first_try(client, tenant, owner):
    sign_in(client, owner)
    form = client.get("/dashboard/password").get_data(as_text=True)
    assert 'aria-describedby="new_password-hint"' in form
    assert '<p class="field-hint" id="new_password-hint">At least 10 characters.</p>' in form


# Roles and other agencies


def test_an_agency_user_sees_only_what_was_granted(client, tenants):
    tenant = tenants.create()
    second = make_sub_account(tenant, timezone="Europe/Berlin")
    helper = agency_user(tenant, second.id)
    sign_in(client, helper.email)
    assert client.get("/dashboard/").headers["Location"] == f"/dashboard/s/{second.id}/"
    assert client.get(f"/dashboard/s/{second.id}/").status_code == 200
    refused = client.get(f"/dashboard/s/{tenant.sub_account_id}/")
    assert refused.status_code == 404 and "Sub account not found" in refused.get_data(as_text=True)
    assert client.get(f"/dashboard/?s={tenant.sub_account_id}").status_code == 404


def fill(rule: str, sub_account_id: int) -> str:
    """A URL of ``rule`` for the sub account; any other argument gets the first value of its
    kind (an id of 1, the first of an ``any(...)``), so a new route needs no change here."""
    url = rule.replace("<int:sub_account_id>", str(sub_account_id))
    url = re.sub(r"<int:\w+>", "1", url)
    url = re.sub(r"<any\(([\w-]+)[^)]*\):\w+>", r"\1", url)
    return re.sub(r"<(?:string:)?\w+>", "x", url)


def dashboard_rules(app):
    return [rule for rule in app.url_map.iter_rules() if rule.rule.startswith("/dashboard")]


def test_every_dashboard_page_needs_a_signed_in_user(app, client, tenant):
    for rule in dashboard_rules(app):
        url = fill(rule.rule, tenant.sub_account_id)
        assert "<" not in url, f"{rule.rule}: give the test a value for its argument"
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            response = client.open(url, method=method)
            assert response.status_code == 302, (method, url)
            assert response.headers["Location"].startswith("/login"), (method, url)


def test_no_dashboard_page_shows_another_agencys_sub_account(app, client, tenants):
    """Enumerates the routes, so a new page cannot forget its check."""
    mine, theirs = tenants.create(), tenants.create()
    sign_in(client, owner_email(mine))
    checked = 0
    for rule in dashboard_rules(app):
        if "sub_account_id" not in rule.arguments:
            continue
        url = fill(rule.rule, theirs.sub_account_id)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            response = client.open(url, method=method)
            assert response.status_code == 404, (method, url)
            checked += 1
    assert checked >= 1


def test_owners_only_pages_refuse_agency_users(app, client, tenant):
    """Every page marked ``owners_only`` answers 403 to an agency user granted the sub account,
    and its area is absent from their menu."""
    helper = agency_user(tenant, tenant.sub_account_id)
    sign_in(client, helper.email)
    menu = client.get(f"/dashboard/s/{tenant.sub_account_id}/").get_data(as_text=True)
    checked = 0
    for rule in dashboard_rules(app):
        if not getattr(app.view_functions[rule.endpoint], "owners_only", False):
            continue
        url = fill(rule.rule, tenant.sub_account_id)
        assert f'href="{url}"' not in menu, url
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            response = client.open(url, method=method)
            assert response.status_code == 403, (method, url)
            checked += 1
    assert checked >= 1, "no owners-only page found"


def test_an_id_too_large_to_store_is_not_found_on_every_page(app, client, tenant):
    """Ids past PostgreSQL's integer range name nothing: 404, not a database error."""
    sign_in(client, owner_email(tenant))
    huge = "99999999999999999999"
    for rule in dashboard_rules(app):
        if "<int:" not in rule.rule:
            continue
        url = re.sub(r"<int:\w+>", huge, rule.rule)
        url = re.sub(r"<any\(([\w-]+)[^)]*\):\w+>", r"\1", url)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            response = client.open(url, method=method)
            assert response.status_code == 404, (method, url)
