"""An agency owner lets an agent connect, in chromium (Playwright) against a live gunicorn:
the consent page as it looks at both widths, and the form's answer sent back to the agent's
redirect URI on loopback, which the page's Content-Security-Policy must allow (chromium holds a
form's redirect to its ``form-action``)."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from playwright.sync_api import expect

from tests.browser_pages import WIDTHS
from tests.dashboard_users import sign_in_browser

pytestmark = pytest.mark.slow  # a live server and a browser

CALLBACK = "http://127.0.0.1:33420/callback"


def test_an_owner_allows_an_agent_and_it_is_sent_back_with_a_code_that_works(browser, site, audit):
    base, demo = site
    client_id = requests.post(
        f"{base}/oauth/register",
        json={
            "client_name": "Browser Assistant",
            "redirect_uris": [CALLBACK],
            "token_endpoint_auth_method": "none",
        },
        timeout=10,
    ).json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    consent_url = f"{base}/dashboard/connect-agent?" + urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": CALLBACK,
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "scope": "canCheckAvailability canGetBookings",
            "state": "browser-1",
        }
    )
    page = browser.new_page(viewport=WIDTHS["laptop"])
    # The agent's local listener: answered here, as the agent would answer it.
    page.route(
        re.compile(r"^http://127\.0\.0\.1:33420/callback.*"),
        lambda route: route.fulfill(status=200, content_type="text/plain", body="Connected."),
    )
    sign_in_browser(page, base, demo.email, demo.password)
    page.goto(consent_url)
    expect(page.get_by_role("heading", name="Connect Browser Assistant?")).to_be_visible()
    expect(page.get_by_label("Check availability")).to_be_checked()
    expect(page.get_by_label("Cancel bookings")).not_to_be_checked()
    audit(page, "agent-consent")

    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(re.compile(r"^http://127\.0\.0\.1:33420/callback\?"))
    answer = parse_qs(urlsplit(page.url).query)
    assert answer["state"] == ["browser-1"]
    tokens = requests.post(
        f"{base}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": answer["code"][0],
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
        },
        timeout=10,
    ).json()
    assert tokens["scope"] == "canCheckAvailability canGetBookings"
    listed = requests.get(
        f"{base}/v1/api/calendar/event-types",
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
        timeout=10,
    )
    assert listed.status_code == 200

    page.goto(consent_url.split("/dashboard/")[0] + "/dashboard/")
    page.get_by_role("link", name="API keys").click()
    row = page.get_by_role("row").filter(has_text="Browser Assistant")
    expect(row).to_be_visible()
    assert "Check availability" in row.inner_text()
