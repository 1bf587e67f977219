"""Security headers: a Content-Security-Policy and no framing on HTML pages, no-store for a
signed-in user's pages, HSTS over TLS only, no cookies from the agent API, and X-Forwarded-*
believed only from a configured number of proxies (so the per-address rate limit holds)."""

from __future__ import annotations

import os
import re
import uuid

import pytest
from playwright.sync_api import expect

from app.config import settings_of
from app.security_headers import HSTS, source_hash
from tests.browser_pages import launched_browser
from tests.dashboard_users import create_key, plain_key_of, sign_in_browser
from tests.servers import gunicorn, migrate_and_run_demo

BOOKINGS = "/v1/api/calendar/bookings"
STRICT = (
    "default-src 'self'",
    "style-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
)
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
_HANDLER = re.compile(r'\son[a-z]+="([^"]*)"')


def overview(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/"


def directives(response) -> dict[str, str]:
    policy = response.headers["Content-Security-Policy"]
    return {d.split()[0]: d for d in (part.strip() for part in policy.split(";")) if d}


def assert_strict(response) -> None:
    found = directives(response)
    for directive in STRICT:
        assert found[directive.split()[0]].startswith(directive), found
    assert found["script-src"].startswith("script-src 'self'")
    assert "'unsafe-inline'" not in found["script-src"]
    assert "'unsafe-eval'" not in found["script-src"]


def guess(client, **headers):
    return client.get(BOOKINGS, headers={"x-calendar-api-key": f"guess-{uuid.uuid4()}", **headers})


def test_the_sign_in_page_has_a_strict_policy_that_forbids_framing(client):
    response = client.get("/login")
    assert response.status_code == 200
    assert_strict(response)
    assert response.headers["X-Frame-Options"] == "DENY"


def test_a_signed_in_dashboard_page_has_the_strict_policy_too(signed_in, tenant):
    response = signed_in.get(overview(tenant))
    assert response.status_code == 200
    assert_strict(response)
    assert response.headers["X-Frame-Options"] == "DENY"


def test_pages_are_not_sniffed_and_send_no_referrer_elsewhere(client):
    response = client.get("/login")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"


def test_a_signed_in_dashboard_page_is_not_stored(signed_in, tenant):
    assert signed_in.get(overview(tenant)).headers["Cache-Control"] == "no-store"


def test_the_sign_in_page_of_a_visitor_is_not_marked_no_store(client):
    assert "no-store" not in client.get("/login").headers.get("Cache-Control", "")


def test_every_inline_script_and_handler_of_the_dashboard_is_allowed_by_its_hash(signed_in, tenant):
    """The sub-account switcher's onchange, the show-once box's onfocus and copy script."""
    created = create_key(signed_in, tenant, name="agent", permissions=["canGetBookings"])
    plain_key_of(created)  # the show-once page
    for response in (signed_in.get(overview(tenant)), created):
        html = response.get_data(as_text=True)
        inline = _INLINE_SCRIPT.findall(html) + _HANDLER.findall(html)
        assert inline, "the page has no inline script to check"
        script_src = directives(response)["script-src"]
        assert [s for s in inline if source_hash(s) not in script_src] == []


def test_the_swagger_ui_page_allows_only_its_own_inline_script(client):
    response = client.get("/v1/api/docs")
    assert response.status_code == 200
    (script,) = _INLINE_SCRIPT.findall(response.get_data(as_text=True))
    found = directives(response)
    assert found["script-src"] == f"script-src 'self' {source_hash(script)}"
    assert found["frame-ancestors"] == "frame-ancestors 'none'"


def test_no_hsts_over_plain_http(client):
    assert "Strict-Transport-Security" not in client.get("/login").headers


def test_hsts_over_tls(client):
    response = client.get("/login", base_url="https://localhost")
    assert response.headers["Strict-Transport-Security"] == HSTS


def test_a_forwarded_https_brings_no_hsts_without_a_trusted_proxy(client):
    response = client.get("/login", headers={"X-Forwarded-Proto": "https"})
    assert "Strict-Transport-Security" not in response.headers


def test_hsts_behind_a_trusted_proxy_that_terminated_tls(make_app):
    client = make_app(TRUSTED_PROXY_COUNT=1).test_client()
    response = client.get("/login", headers={"X-Forwarded-Proto": "https"})
    assert response.headers["Strict-Transport-Security"] == HSTS


@pytest.mark.parametrize(
    "path, key, status",
    [(BOOKINGS, "all", 200), (BOOKINGS, None, 401), (f"{BOOKINGS}/99999999", "all", 404)],
)
def test_the_api_sets_no_cookie_even_for_a_signed_in_browser(signed_in, tenant, path, key, status):
    headers = tenant.headers(key) if key else {"x-calendar-api-key": "not-a-key"}
    response = signed_in.get(path, headers=headers)
    assert response.status_code == status
    assert "Set-Cookie" not in response.headers
    assert "Cookie" not in response.headers.get("Vary", "")


def test_the_api_docs_set_no_cookie(signed_in):
    for path in ("/v1/api/docs", "/v1/api/openapi.json"):
        assert "Set-Cookie" not in signed_in.get(path).headers


def test_forged_x_forwarded_for_cannot_dodge_the_address_limit(make_app):
    client = make_app(RATE_LIMIT_UNAUTHENTICATED="3/minute").test_client()
    statuses = [
        guess(client, **{"X-Forwarded-For": f"198.51.100.{i}"}).status_code for i in range(4)
    ]
    assert statuses == [401, 401, 401, 429]


def test_behind_a_trusted_proxy_its_forwarded_clients_are_counted_apart(make_app):
    app = make_app(RATE_LIMIT_UNAUTHENTICATED="3/minute", TRUSTED_PROXY_COUNT=1)
    client = app.test_client()
    first = [guess(client, **{"X-Forwarded-For": "203.0.113.1"}).status_code for _ in range(4)]
    assert first == [401, 401, 401, 429]
    assert guess(client, **{"X-Forwarded-For": "203.0.113.2"}).status_code == 401


def test_behind_a_trusted_proxy_entries_a_client_forged_before_its_own_are_ignored(make_app):
    app = make_app(RATE_LIMIT_UNAUTHENTICATED="3/minute", TRUSTED_PROXY_COUNT=1)
    client = app.test_client()
    statuses = [
        guess(client, **{"X-Forwarded-For": f"198.51.100.{i}, 203.0.113.1"}).status_code
        for i in range(4)
    ]
    assert statuses == [401, 401, 401, 429]


def test_the_trusted_proxy_count_comes_from_the_environment(make_app, monkeypatch):
    monkeypatch.setenv("TRUSTED_PROXY_COUNT", "1")
    app = make_app()
    assert settings_of(app).trusted_proxy_count == 1
    response = app.test_client().get("/login", headers={"X-Forwarded-Proto": "https"})
    assert response.headers["Strict-Transport-Security"] == HSTS


# In a real browser: the pages keep working under their policies, and break none of its rules.


@pytest.fixture(scope="module")
def browser():
    with launched_browser() as launched:
        yield launched


@pytest.mark.slow
def test_the_dashboard_and_the_api_docs_work_in_a_browser_without_a_policy_violation(
    browser, postgres_database
):
    url = postgres_database()
    demo = migrate_and_run_demo(
        {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key"}
    )
    problems: list[str] = []
    with gunicorn(url, workers=1) as base:
        page = browser.new_page()
        page.expose_function("reportViolation", lambda text: problems.append(text))
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => window.reportViolation("
            "`${e.violatedDirective} blocked ${e.blockedURI} ${e.sample}`))"
        )
        page.on("pageerror", lambda error: problems.append(f"error: {error}"))

        sign_in_browser(page, base, demo.email, demo.password)
        first = page.url
        first_id = first.rstrip("/").rsplit("/", 1)[1]

        # A second sub account, then the switcher (its onchange) goes back to the first.
        page.get_by_role("link", name="Team").click()
        page.get_by_label("Name", exact=True).fill("Harbour Physio")
        page.get_by_label("Timezone").fill("Europe/Berlin")
        page.get_by_role("button", name="Create sub account").click()
        page.wait_for_url(lambda address: address != first and "/dashboard/s/" in address)
        page.get_by_label("Sub account").select_option(value=first_id)
        page.wait_for_url(first)

        # The calendar: FullCalendar renders, with its styles and icon font.
        page.goto(first + "calendar")
        page.locator(".fc-timegrid").wait_for()
        assert page.locator(".fc-toolbar").evaluate("e => getComputedStyle(e).display") == "flex"

        # htmx: the availability preview is fetched and swapped in, not a page load.
        page.goto(first + "availability")
        with page.expect_response(lambda r: "/availability/preview" in r.url) as preview:
            page.get_by_role("button", name="Show").click()
        assert preview.value.request.headers.get("hx-request") == "true"

        # The show-once box: its copy script shows the button.
        page.goto(first + "api-keys")
        page.get_by_label("Name", exact=True).fill("Browser agent")
        page.get_by_label("Check availability").check()
        page.get_by_role("button", name="Create key").click()
        expect(page.get_by_role("button", name="Copy")).to_be_visible()

        # Swagger UI, under its own policy.
        page.goto(base + "/v1/api/docs")
        page.locator(".swagger-ui .info .title").wait_for()
        page.locator(".opblock").first.wait_for()
        page.close()
    assert problems == []
