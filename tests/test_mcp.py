"""The MCP server (``python -m app.mcp``) as an agent's MCP client meets it: the SDK's own
client over stdio and over streamable HTTP, against the live API on loopback."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.factories import next_monday, ny, z
from tests.live_api import live_api
from tests.lossy_proxy import first_create_lost, lossy_proxy
from tests.servers import ROOT, free_port, wait_until_serving

pytestmark = pytest.mark.slow

MONDAY = next_monday()
TOOLS = {
    "check_availability",
    "list_bookings",
    "get_booking",
    "create_booking",
    "update_booking",
    "cancel_booking",
}


@pytest.fixture
def tenant(live):
    return live.tenant()


@contextmanager
def mcp_http_server(api_url: str) -> Iterator[str]:
    """``python -m app.mcp --http`` on a free port; yields its ``/mcp`` URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.mcp", "--http", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "CALENDAR_API_URL": api_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/mcp")  # any answer will do
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=15)


@asynccontextmanager
async def stdio_client(api_url: str, key: str) -> AsyncIterator[Client]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.mcp"],
        env={**os.environ, "CALENDAR_API_URL": api_url, "CALENDAR_API_KEY": key},
        cwd=str(ROOT),
    )
    async with Client(server) as client:
        yield client


@asynccontextmanager
async def http_client(mcp_url: str, key: str | None) -> AsyncIterator[Client]:
    headers = {"x-calendar-api-key": key} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(mcp_url, http_client=http)) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def mcp_url(live):
    with mcp_http_server(live.base_url) as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def connect(request, live):
    """Opens an MCP client session with a key, over the parametrized transport."""
    if request.param == "stdio":
        return lambda key: stdio_client(live.base_url, key)
    url = request.getfixturevalue("mcp_url")
    return lambda key: http_client(url, key)


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """The tool's structured result; a tool error fails with its text."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content.get("result", result.structured_content)


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return result.content[0].text


def test_the_six_tools_are_described_for_a_model(connect, tenant):
    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = asyncio.run(scenario())
    assert set(tools) == TOOLS
    create = tools["create_booking"]
    assert create.input_schema["required"] == ["eventTypeId", "startTime", "endTime", "attendees"]
    assert create.input_schema["properties"]["attendees"]["items"]["required"] == ["email"]
    for words in ("check_availability", "idempotencyKey", "retry", "canBook"):
        assert words in create.description
    assert "ISO 8601" in create.input_schema["properties"]["startTime"]["description"]
    assert "owner" in create.input_schema["properties"]["eventTypeId"]["description"]
    for name in ("check_availability", "list_bookings", "get_booking"):
        assert tools[name].annotations.read_only_hint is True
    for name in ("update_booking", "cancel_booking"):
        assert tools[name].annotations.read_only_hint is False
        assert tools[name].annotations.destructive_hint is True
    assert create.annotations.destructive_hint is False


def test_an_agent_finds_a_slot_books_moves_and_cancels_it(connect, tenant):
    event_type = tenant.event_types["Cleaning"]

    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            days = await call(
                client,
                "check_availability",
                startDate=z(ny(MONDAY, 0)),
                endDate=z(ny(MONDAY, 23, 59)),
                eventTypeId=event_type,
            )
            slots = [slot for day in days for slot in day["slots"]]
            first, later = slots[0], slots[4]
            booking = await call(
                client,
                "create_booking",
                eventTypeId=event_type,
                startTime=first["start"],
                endTime=first["end"],
                attendees=[{"email": "pat@example.test", "name": "Pat"}],
                title="Cleaning",
            )
            moved = await call(
                client,
                "update_booking",
                eventTypeId=event_type,
                id=booking["id"],
                startTime=later["start"],
                endTime=later["end"],
            )
            fetched = await call(client, "get_booking", id=booking["id"])
            cancelled = await call(client, "cancel_booking", id=booking["id"], reason="Ill")
            listed = await call(client, "list_bookings", email="pat@example.test")
            return first, later, booking, moved, fetched, cancelled, listed

    first, later, booking, moved, fetched, cancelled, listed = asyncio.run(scenario())
    assert first["start"] == z(ny(MONDAY, 9))
    assert (booking["status"], booking["startTime"]) == ("pending", first["start"])
    assert booking["uid"] and booking["attendees"][0]["email"] == "pat@example.test"
    assert (moved["id"], moved["startTime"]) == (booking["id"], later["start"])
    assert fetched["startTime"] == later["start"]
    assert (cancelled["status"], cancelled["cancellationReason"]) == ("cancelled", "Ill")
    assert listed["total"] == 1 and listed["bookings"][0]["status"] == "cancelled"


def test_a_key_without_can_book_is_told_which_permission_it_lacks(connect, tenant):
    async def scenario():
        async with connect(tenant.keys["without-canBook"]) as client:
            return await refused(
                client,
                "create_booking",
                eventTypeId=tenant.event_types["Cleaning"],
                startTime=z(ny(MONDAY, 10)),
                endTime=z(ny(MONDAY, 10, 30)),
                attendees=[{"email": "pat@example.test"}],
            )

    text = asyncio.run(scenario())
    assert "Permission denied (403)" in text
    assert "'canBook'" in text and "Book appointments" in text


def test_a_taken_slot_tells_the_agent_to_check_availability(connect, tenant):
    booking = {
        "eventTypeId": tenant.event_types["Cleaning"],
        "startTime": z(ny(MONDAY, 10)),
        "endTime": z(ny(MONDAY, 10, 30)),
        "attendees": [{"email": "pat@example.test"}],
    }

    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            await call(client, "create_booking", **booking)
            return await refused(client, "create_booking", **booking)

    text = asyncio.run(scenario())
    assert "Time slot conflicts with an existing booking" in text
    assert "check_availability" in text


def test_over_http_a_call_without_a_key_says_where_to_send_it(mcp_url):
    async def scenario():
        async with http_client(mcp_url, None) as client:
            return await refused(client, "list_bookings")

    assert "x-calendar-api-key" in asyncio.run(scenario())


def test_over_http_each_client_acts_with_its_own_key(mcp_url, live):
    one, other = live.tenant(), live.tenant()

    async def book_with(tenant):
        async with http_client(mcp_url, tenant.keys["all"]) as client:
            await call(
                client,
                "create_booking",
                eventTypeId=tenant.event_types["Cleaning"],
                startTime=z(ny(MONDAY, 10)),
                endTime=z(ny(MONDAY, 10, 30)),
                attendees=[{"email": "pat@example.test"}],
            )
            return await call(client, "list_bookings")

    async def scenario():
        return await asyncio.gather(book_with(one), book_with(other))

    first, second = asyncio.run(scenario())
    assert first["total"] == 1 and second["total"] == 1  # each sees its own calendar only
    assert first["bookings"][0]["id"] != second["bookings"][0]["id"]


def test_a_rate_limited_call_is_retried_and_then_succeeds(migrated_postgres_database):
    with live_api(migrated_postgres_database(), RATE_LIMIT="2 per 2 seconds") as limited:
        tenant = limited.tenant()

        async def scenario():
            async with stdio_client(limited.base_url, tenant.keys["all"]) as client:
                return [await call(client, "list_bookings") for _ in range(4)]

        pages = asyncio.run(scenario())
    assert [page["total"] for page in pages] == [0, 0, 0, 0]


def test_a_create_whose_answer_was_lost_books_once(live, tenant):
    with lossy_proxy(live.port, first_create_lost()) as proxy:

        async def scenario():
            async with stdio_client(f"{proxy.url}/v1/api", tenant.keys["all"]) as client:
                created = await call(
                    client,
                    "create_booking",
                    eventTypeId=tenant.event_types["Cleaning"],
                    startTime=z(ny(MONDAY, 10)),
                    endTime=z(ny(MONDAY, 10) + timedelta(minutes=30)),
                    attendees=[{"email": "pat@example.test"}],
                )
                return created, await call(client, "list_bookings")

        created, listed = asyncio.run(scenario())
    assert len(proxy.lost) == 1
    assert listed["total"] == 1 and listed["bookings"][0]["id"] == created["id"]
