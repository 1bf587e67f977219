"""An MCP client connects to a freshly started service from nothing but the MCP server's URL:
the MCP SDK's own OAuth client (``OAuthClientProvider``) discovers the authorization server
from the 401, registers, sends the owner through the dashboard's consent page with PKCE,
exchanges the code, books through MCP with the token, refreshes it when it expires, and is
refused with 401 once the owner revokes it in the dashboard.

The owner is a browser session (``requests``) signed in to the dashboard of the live server;
the MCP server runs as ``python -m app.mcp --http``, as a deployment runs it."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from sqlalchemy import select

from app.extensions import db
from app.models import OAuthClient
from app.models import OAuthToken as StoredToken
from tests.dashboard_users import PASSWORD, owner_email
from tests.factories import next_monday, ny, z
from tests.live_api import LiveApi, live_api
from tests.mcp_servers import mcp_http_server

pytestmark = [pytest.mark.slow, pytest.mark.date_sensitive]  # a booking next Monday

CALLBACK = "http://127.0.0.1:33419/callback"
ACCESS_SECONDS = 3
CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


@pytest.fixture(scope="module")
def live(migrated_postgres_database: Callable[[], str]) -> Iterator[LiveApi]:
    """The service with access tokens short enough to see one expire."""
    with live_api(
        migrated_postgres_database(), OAUTH_ACCESS_TOKEN_SECONDS=str(ACCESS_SECONDS)
    ) as server:
        yield server


@pytest.fixture(scope="module")
def mcp_url(live):
    with mcp_http_server(live.base_url) as url:
        yield url


class Storage:
    """The MCP client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Owner:
    """The agency owner in a browser, signed in to the live server's dashboard."""

    def __init__(self, base: str, email: str) -> None:
        self.base = base
        self.browser = requests.Session()
        login = self.browser.get(f"{base}/login", timeout=10).text
        self.browser.post(
            f"{base}/login",
            data={"email": email, "password": PASSWORD, "csrf_token": CSRF.search(login)[1]},
            timeout=10,
        )
        self.redirects: list[str] = []

    def consent(self, authorization_url: str, sub_account_id: int) -> str:
        """Allow everything for ``sub_account_id`` on the consent page; the URL the client is
        sent back to."""
        page = self.browser.get(authorization_url, timeout=10)
        assert page.status_code == 200, page.text
        answer = self.browser.post(
            authorization_url,
            data={
                "csrf_token": CSRF.search(page.text)[1],
                "sub_account_id": sub_account_id,
                "permissions": ["canCheckAvailability", "canGetBookings", "canBook"],
                "decision": "allow",
            },
            allow_redirects=False,
            timeout=10,
        )
        assert answer.status_code == 302, answer.text
        return answer.headers["Location"]

    def revoke(self, sub_account_id: int, grant_id: int) -> None:
        keys = f"{self.base}/dashboard/s/{sub_account_id}/api-keys"
        page = self.browser.get(keys, timeout=10).text
        revoked = self.browser.post(
            f"{keys}/{grant_id}/revoke", data={"csrf_token": CSRF.search(page)[1]}, timeout=10
        )
        assert revoked.status_code == 200 and "is disconnected" in revoked.text


def test_an_mcp_client_connects_books_refreshes_and_is_refused_once_revoked(live, mcp_url):
    tenant = live.tenant()
    with live.app.app_context():
        owner = Owner(live.base_url.removesuffix("/v1/api"), owner_email(tenant))
    storage = Storage()
    sent_back: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        assert len(sent_back) == 0, "the client asked the owner twice"
        location = await asyncio.to_thread(owner.consent, authorization_url, tenant.sub_account_id)
        sent_back.append(location)

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(sent_back[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    provider = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="Test Assistant",
            redirect_uris=[CALLBACK],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def session(work):
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(mcp_url, http_client=http)) as client,
        ):
            return await work(client)

    async def book(client):
        (cleaning, *_) = [
            t for t in (await tool(client, "list_event_types")) if t["name"] == "Cleaning"
        ]
        return await tool(
            client,
            "create_booking",
            eventTypeId=cleaning["id"],
            startTime=z(ny(next_monday(), 10)),
            endTime=z(ny(next_monday(), 10, 30)),
            attendees=[{"email": "pat@example.test"}],
        )

    booking = asyncio.run(session(book))
    assert booking["status"] == "pending" and len(sent_back) == 1
    first = storage.tokens
    assert first is not None and first.refresh_token

    # The access token expires; the next call refreshes it without asking the owner again.
    wait_until_inactive(live, first.access_token)
    listed = asyncio.run(session(lambda client: tool(client, "list_bookings")))
    assert listed["total"] == 1
    assert storage.tokens.access_token != first.access_token
    assert storage.tokens.refresh_token != first.refresh_token
    with live.app.app_context():
        grant_id, spent = db.session.execute(
            select(StoredToken.grant_id, StoredToken.refreshed_at).order_by(StoredToken.id)
        ).first()
    assert spent is not None  # the first refresh token was used up

    owner.revoke(tenant.sub_account_id, grant_id)
    refused = httpx.post(
        mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Authorization": f"Bearer {storage.tokens.access_token}"},
        timeout=10,
    )
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["WWW-Authenticate"]


async def tool(client: Client, name: str, **arguments):
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content.get("result", result.structured_content)


def wait_until_inactive(live: LiveApi, access_token: str) -> None:
    """Until the service's introspection says the token has expired (its lifetime is
    ``ACCESS_SECONDS``)."""
    introspect = live.base_url.removesuffix("/v1/api") + "/oauth/introspect"
    deadline = time.monotonic() + ACCESS_SECONDS + 10
    while httpx.post(introspect, data={"token": access_token}, timeout=10).json()["active"]:
        assert time.monotonic() < deadline, "the access token never expired"
        time.sleep(0.2)


def connect_by_hand(live, tenant, resource: str) -> tuple[str, str, str]:
    """Register, consent as the owner and stop before the exchange: the client's id, the code
    and its verifier (PKCE ``S256``)."""
    import base64
    import hashlib
    import secrets
    from urllib.parse import urlencode

    base = live.base_url.removesuffix("/v1/api")
    client_id = httpx.post(
        f"{base}/oauth/register",
        json={"client_name": "By hand", "redirect_uris": [CALLBACK]},
        timeout=10,
    ).json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": CALLBACK,
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "resource": resource,
        }
    )
    with live.app.app_context():
        owner = Owner(base, owner_email(tenant))
    location = owner.consent(f"{base}/dashboard/connect-agent?{query}", tenant.sub_account_id)
    return client_id, parse_qs(urlsplit(location).query)["code"][0], verifier


def exchange(live, client_id: str, code: str, verifier: str) -> httpx.Response:
    return httpx.post(
        live.base_url.removesuffix("/v1/api") + "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
        },
        timeout=30,
    )


def test_an_exchange_waits_for_one_in_progress_and_is_then_its_replay(live, mcp_url):
    """Two exchanges of one code at once: the second waits on the first's row lock and is
    the replay (no second pair, and the connection revoked)."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    client_id, code, verifier = connect_by_hand(live, live.tenant(), mcp_url)
    url = live.app.config["SQLALCHEMY_DATABASE_URI"].replace("+psycopg", "")
    digest = hashlib.sha256(code.encode()).hexdigest()
    with psycopg.connect(url) as first, psycopg.connect(url, autocommit=True) as watcher:
        with ThreadPoolExecutor(1) as pool, first.transaction():
            # The first exchange, in progress: it has the code's row.
            first.execute("SELECT id FROM oauth_codes WHERE digest = %s FOR UPDATE", (digest,))
            second = pool.submit(exchange, live, client_id, code, verifier)
            deadline = time.monotonic() + 10
            while not waiting_on_a_lock(watcher):
                assert not second.done(), second.result().text
                assert time.monotonic() < deadline, "the second exchange never waited"
                time.sleep(0.05)
            first.execute("UPDATE oauth_codes SET used_at = now() WHERE digest = %s", (digest,))
            # Leaving the transaction commits the first exchange; the pool's end waits for the
            # second (the pool's block closes after the transaction's).
        answer = second.result(timeout=30)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"
    with live.app.app_context():
        given = select(StoredToken.id).join(OAuthClient, OAuthClient.id == StoredToken.client_id)
        assert db.session.scalar(given.where(OAuthClient.client_id == client_id)) is None


def waiting_on_a_lock(watcher) -> bool:
    waiting = watcher.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND datname = current_database()"
    ).fetchone()
    return bool(waiting and waiting[0])


def test_a_token_issued_for_another_resource_is_refused_by_the_mcp_server(live, mcp_url):
    client_id, code, verifier = connect_by_hand(live, live.tenant(), "https://other.example/mcp")
    token = exchange(live, client_id, code, verifier).json()["access_token"]
    answer = httpx.post(
        mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["WWW-Authenticate"]
