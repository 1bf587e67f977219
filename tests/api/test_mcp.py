"""The MCP server (``python -m app.mcp``) as an agent's MCP client meets it: the SDK's own
client over stdio and over streamable HTTP, against the live API on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from app.client import CalendarUnreachable, SlotUnavailable
from app.mcp.server import tool_error
from tests.factories import next_monday, ny, z
from tests.live_api import live_api
from tests.lossy_proxy import first_create_lost, lossy_proxy
from tests.mcp_servers import mcp_http_server
from tests.servers import ROOT

pytestmark = pytest.mark.slow

MONDAY = next_monday()
TEN = {"startTime": z(ny(MONDAY, 10)), "endTime": z(ny(MONDAY, 10, 30))}  # a Cleaning slot
TOOLS = {
    "list_event_types",
    "check_availability",
    "list_bookings",
    "get_booking",
    "create_booking",
    "update_booking",
    "cancel_booking",
    "hold_slot",
    "release_hold",
}


def slots_at(*starts: tuple[int, int]) -> list[dict[str, str]]:
    """Cleaning slots (30 minutes) at these New York (hour, minute)s of MONDAY, as the API
    gives them."""
    return [
        {"start": z(ny(MONDAY, h, m)), "end": z(ny(MONDAY, h, m) + timedelta(minutes=30))}
        for h, m in starts
    ]


# The open Cleaning slots nearest to 10:00 when 10:00-10:30 is taken or held (with its 10
# minutes' buffer after): 9:30 and 10:30 overlap it; 9:00 and 11:00 are as near, earlier first.
NEAREST_TO_TEN = slots_at((9, 0), (11, 0), (11, 30), (12, 0), (12, 30))


@pytest.fixture
def tenant(live):
    return live.tenant()


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


@asynccontextmanager
async def two_agents(connect, tenant) -> AsyncIterator[tuple[Client, Client]]:
    """Sessions of two agents of the sub account: one with every permission, and another
    that may book but not cancel."""
    async with (
        connect(tenant.keys["all"]) as agent,
        connect(tenant.keys["without-canCancel"]) as other_agent,
    ):
        yield agent, other_agent


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return result.content[0].text


def test_the_tools_are_described_for_a_model(connect, tenant):
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
    assert "list_event_types" in create.input_schema["properties"]["eventTypeId"]["description"]
    for name in ("check_availability", "list_bookings", "get_booking"):
        assert tools[name].annotations.read_only_hint is True
    for name in ("update_booking", "cancel_booking"):
        assert tools[name].annotations.read_only_hint is False
        assert tools[name].annotations.destructive_hint is True
    assert create.annotations.destructive_hint is False
    for name in ("create_booking", "update_booking"):
        token = tools[name].input_schema["properties"]["holdToken"]
        assert "hold_slot" in token["description"] and "expiresAt" in token["description"]
        assert "holdToken" not in tools[name].input_schema["required"]
    for words in ("hold_slot", "holdToken", "code", "nearest open slots"):
        assert words in create.description
    assert "holdToken" in tools["update_booking"].description


def test_the_hold_tools_explain_the_hold_flow(connect, tenant):
    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = asyncio.run(scenario())
    hold, release = tools["hold_slot"], tools["release_hold"]
    assert hold.input_schema["required"] == ["eventTypeId", "startTime", "endTime"]
    ttl = hold.input_schema["properties"]["ttlSeconds"]
    assert "120" in ttl["description"]
    assert any(choice.get("maximum") == 600 for choice in ttl.get("anyOf", [ttl]))
    for words in ("name and email", "create_booking", "holdToken", "expiresAt", "release_hold"):
        assert words in hold.description
    assert "slot_held" in hold.description and "canBook" in hold.description
    assert release.input_schema["required"] == ["eventTypeId", "id"]
    assert "hold_slot" in release.description and "canBook" in release.description
    assert hold.annotations.read_only_hint is False
    assert (hold.annotations.destructive_hint, hold.annotations.idempotent_hint) == (False, False)
    assert release.annotations.read_only_hint is False
    assert release.annotations.destructive_hint is True
    assert release.annotations.idempotent_hint is True


@pytest.mark.date_sensitive
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


@pytest.mark.date_sensitive
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


@pytest.mark.date_sensitive
def test_a_taken_slot_names_its_code_and_offers_the_nearest_open_slots(connect, tenant):
    booking = {
        "eventTypeId": tenant.event_types["Cleaning"],
        **TEN,
        "attendees": [{"email": "pat@example.test"}],
    }

    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            await call(client, "create_booking", **booking)
            return await refused(client, "create_booking", **booking)

    text = asyncio.run(scenario())
    assert "That time cannot be booked (400, code slot_taken)" in text
    assert "Time slot conflicts with an existing booking" in text
    assert json.dumps(NEAREST_TO_TEN) in text  # ready to offer, as the API gives slots
    assert "call create_booking again with one slot's start as startTime" in text


@pytest.mark.date_sensitive
def test_a_time_with_no_open_slot_near_it_says_to_check_availability(connect, live):
    # A calendar without working hours: nothing is ever open, so nothing can be suggested.
    tenant = live.tenant(
        availabilityProfiles=[{"name": "Office", "default": True, "weeklyHours": {}}]
    )

    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            return await refused(
                client,
                "hold_slot",
                eventTypeId=tenant.event_types["Cleaning"],
                startTime=z(ny(MONDAY, 10)),
                endTime=z(ny(MONDAY, 10, 30)),
            )

    text = asyncio.run(scenario())
    assert "That time cannot be held (400, code outside_hours)" in text
    assert "No open slot is near it: call check_availability" in text


def test_over_http_a_call_without_a_key_or_token_is_told_where_to_connect(mcp_url, live):
    answer = httpx.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert answer.status_code == 401
    challenge = answer.headers["WWW-Authenticate"]
    metadata_url = re.fullmatch(r'Bearer resource_metadata="([^"]+)"', challenge).group(1)
    assert "x-calendar-api-key" in answer.json()["error_description"]
    metadata = httpx.get(metadata_url, timeout=10).json()
    assert metadata["resource"] == mcp_url
    assert metadata["authorization_servers"] == [live.base_url.removesuffix("/v1/api")]


@pytest.mark.date_sensitive
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


@pytest.mark.date_sensitive
def test_a_repeated_availability_check_is_asked_with_its_etag_and_answered_304(live, tenant):
    with lossy_proxy(live.port, lambda request: False) as proxy:

        async def scenario():
            async with stdio_client(f"{proxy.url}/v1/api", tenant.keys["all"]) as client:
                ask = {
                    "eventTypeId": tenant.event_types["Cleaning"],
                    "startDate": MONDAY.isoformat(),
                    "endDate": MONDAY.isoformat(),
                }
                return [await call(client, "check_availability", **ask) for _ in range(2)]

        first, second = asyncio.run(scenario())
    assert second == first and first[0]["slots"]
    asked = [(head, status) for head, status in proxy.exchanges if b"/availability" in head]
    assert [status.split(b" ")[1] for _, status in asked] == [b"200", b"304"]
    assert b"if-none-match: w/" in asked[1][0].lower()


@pytest.mark.date_sensitive
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


@pytest.mark.date_sensitive
def test_an_agent_holds_a_slot_collects_details_and_books_it_with_the_token(connect, tenant):
    event_type = tenant.event_types["Cleaning"]
    ten = {"eventTypeId": event_type, **TEN}
    attendees = [{"email": "pat@example.test", "name": "Pat"}]

    async def scenario():
        async with two_agents(connect, tenant) as (agent, other_agent):
            held = await call(agent, "hold_slot", **ten, ttlSeconds=300)
            days = await call(
                agent,
                "check_availability",
                startDate=z(ny(MONDAY, 0)),
                endDate=z(ny(MONDAY, 23, 59)),
                eventTypeId=event_type,
            )
            taken_meanwhile = await refused(
                other_agent, "create_booking", **ten, attendees=[{"email": "sam@example.test"}]
            )
            booked = await call(
                agent, "create_booking", **ten, attendees=attendees, holdToken=held["holdToken"]
            )
            token_again = await refused(
                agent, "create_booking", **ten, attendees=attendees, holdToken=held["holdToken"]
            )
            listed = await call(agent, "list_bookings", email="pat@example.test")
            return held, days, taken_meanwhile, booked, token_again, listed

    held, days, taken_meanwhile, booked, token_again, listed = asyncio.run(scenario())
    assert set(held) == {
        "id",
        "eventTypeId",
        "startTime",
        "endTime",
        "expiresAt",
        "holdToken",
        # each time also in the local time of the zone it names
        "timezone",
        "startTimeLocal",
        "endTimeLocal",
        "expiresAtLocal",
    }
    assert held["timezone"] == "America/New_York"
    assert (held["eventTypeId"], held["startTime"], held["endTime"]) == (
        event_type,
        ten["startTime"],
        ten["endTime"],
    )
    assert held["holdToken"].startswith("hold_") and held["expiresAt"].endswith("Z")
    assert ten["startTime"] not in [slot["start"] for day in days for slot in day["slots"]]
    assert "(400, code slot_held)" in taken_meanwhile
    assert json.dumps(NEAREST_TO_TEN) in taken_meanwhile
    assert (booked["status"], booked["startTime"]) == ("pending", ten["startTime"])
    assert "(400, code slot_taken)" in token_again  # a used token holds nothing
    assert listed["total"] == 1 and listed["bookings"][0]["id"] == booked["id"]


@pytest.mark.date_sensitive
def test_an_agent_releases_a_hold_it_no_longer_needs(connect, tenant):
    event_type = tenant.event_types["Cleaning"]
    ten = {"eventTypeId": event_type, **TEN}

    async def scenario():
        async with two_agents(connect, tenant) as (agent, other_agent):
            held = await call(agent, "hold_slot", **ten)
            released = await call(agent, "release_hold", eventTypeId=event_type, id=held["id"])
            again = await refused(agent, "release_hold", eventTypeId=event_type, id=held["id"])
            booked = await call(
                other_agent, "create_booking", **ten, attendees=[{"email": "sam@example.test"}]
            )
            return held, released, again, booked

    held, released, again, booked = asyncio.run(scenario())
    assert (released["id"], released["status"]) == (held["id"], "released")
    assert released["releasedAt"].endswith("Z")
    assert "Not found (404, code not_found): Hold not found." in again
    assert "nothing to release" in again
    assert booked["startTime"] == ten["startTime"]


@pytest.mark.date_sensitive
def test_a_booking_is_moved_into_a_held_slot_with_the_token(connect, tenant):
    event_type = tenant.event_types["Cleaning"]

    async def scenario():
        async with connect(tenant.keys["all"]) as agent:
            booking = await call(
                agent,
                "create_booking",
                eventTypeId=event_type,
                startTime=z(ny(MONDAY, 14)),
                endTime=z(ny(MONDAY, 14, 30)),
                attendees=[{"email": "pat@example.test"}],
            )
            held = await call(agent, "hold_slot", eventTypeId=event_type, **TEN)
            without = await refused(
                agent, "update_booking", eventTypeId=event_type, id=booking["id"], **TEN
            )
            moved = await call(
                agent,
                "update_booking",
                eventTypeId=event_type,
                id=booking["id"],
                holdToken=held["holdToken"],
                **TEN,
            )
            return without, moved

    without, moved = asyncio.run(scenario())
    assert "The booking cannot be moved to that time (400, code slot_held)" in without
    assert "call update_booking again" in without
    assert moved["startTime"] == z(ny(MONDAY, 10))


def test_a_hold_whose_answer_was_lost_is_not_blindly_retried():
    text = str(tool_error(CalendarUnreachable("POST …/holds: reset"), "hold_slot"))
    assert "Whether the slot was held is unknown" in text
    assert "slot_held" in text and "idempotencyKey" not in text


def test_a_conflict_without_code_or_suggestions_still_reads_well():
    """From a server older than codes and suggestions."""
    old = SlotUnavailable(400, "Time slot conflicts with an existing booking")
    text = str(tool_error(old, "create_booking"))
    assert text.startswith("That time cannot be booked (400): Time slot conflicts")
    assert "call check_availability" in text


def initialize(url: str, **headers: str) -> httpx2.Response:
    """An MCP ``initialize`` request to ``url``, with ``headers`` (``Host``, ``Origin``) and an
    API key (initializing asks the API nothing, so any key passes the OAuth gate)."""
    return httpx2.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "1"},
            },
        },
        headers={
            "Accept": "application/json, text/event-stream",
            "x-calendar-api-key": "cbk_probe",
            **headers,
        },
        timeout=10,
    )


def test_listening_beyond_loopback_still_refuses_a_host_or_origin_not_allowed(live):
    allowed = (
        "--allowed-host",
        "mcp.example.test",
        "--allowed-origin",
        "https://agent.example.test",
    )
    with mcp_http_server(live.base_url, *allowed, host="127.0.0.2") as url:
        port = url.split(":")[2].split("/")[0]
        assert initialize(url).status_code == 200  # Host: 127.0.0.2:PORT, the address it is on
        assert initialize(url, Host="mcp.example.test").status_code == 200
        assert initialize(url, Host=f"mcp.example.test:{port}").status_code == 200
        assert initialize(url, Host="evil.test").status_code == 421
        assert initialize(url, Origin="https://evil.test").status_code == 403
        assert initialize(url, Origin="https://agent.example.test").status_code == 200


INTAKE = [
    {
        "key": "reason",
        "label": "Reason for the visit",
        "type": "select",
        "required": True,
        "options": ["Tooth pain", "Check-up"],
    },
    {"key": "dateOfBirth", "label": "Date of birth", "type": "text", "required": True},
]


@pytest.mark.date_sensitive
def test_an_agent_reads_the_questions_and_books_with_the_answers(connect, live):
    tenant = live.tenant(eventTypes=[{"name": "Intake", "duration": 30, "questions": INTAKE}])
    start, end = z(ny(MONDAY, 9)), z(ny(MONDAY, 9, 30))
    pat = [{"email": "pat@example.test", "name": "Pat"}]

    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            (intake,) = await call(client, "list_event_types")
            ask = {"eventTypeId": intake["id"], "startTime": start, "endTime": end}
            missing = await refused(
                client, "create_booking", **ask, attendees=pat, responses={"reason": "Check-up"}
            )
            answers = {"reason": "Check-up", "dateOfBirth": "1980-02-01"}
            booking = await call(client, "create_booking", **ask, attendees=pat, responses=answers)
            return intake, missing, booking

    intake, missing, booking = asyncio.run(scenario())
    assert intake["questions"]["required"] == ["reason", "dateOfBirth"]
    assert intake["questions"]["properties"]["reason"]["enum"] == ["Tooth pain", "Check-up"]
    assert "invalid_responses" in missing and "responses.dateOfBirth" in missing
    assert booking["responses"] == {"reason": "Check-up", "dateOfBirth": "1980-02-01"}


@pytest.mark.date_sensitive
def test_every_time_an_agent_reads_is_also_in_local_time_with_its_zone(connect, tenant):
    cleaning = tenant.event_types["Cleaning"]
    nine = ny(MONDAY, 9).astimezone(ZoneInfo("America/New_York"))

    async def scenario():
        async with connect(tenant.keys["all"]) as client:
            days = await call(
                client,
                "check_availability",
                startDate=MONDAY.isoformat(),
                endDate=MONDAY.isoformat(),
                eventTypeId=cleaning,
            )
            slot = days[0]["slots"][0]
            booking = await call(
                client,
                "create_booking",
                eventTypeId=cleaning,
                startTime=slot["start"],
                endTime=slot["end"],
                attendees=[{"email": "pat@example.test"}],
            )
            paris = await call(
                client,
                "check_availability",
                startDate=MONDAY.isoformat(),
                endDate=MONDAY.isoformat(),
                eventTypeId=cleaning,
                timezone="Europe/Paris",
            )
            listed = await call(client, "list_bookings")
            return days, booking, paris, listed

    days, booking, paris, listed = asyncio.run(scenario())
    assert days[0]["timezone"] == "America/New_York"
    assert days[0]["slots"][0]["startLocal"] == nine.isoformat()
    assert days[0]["slots"][0]["start"] == z(nine)
    assert (booking["timezone"], booking["startTimeLocal"]) == (
        "America/New_York",
        nine.isoformat(),
    )
    assert paris[0]["timezone"] == "Europe/Paris"
    first_in_paris = paris[0]["slots"][0]
    in_paris = datetime.fromisoformat(first_in_paris["start"]).astimezone(ZoneInfo("Europe/Paris"))
    assert first_in_paris["startLocal"] == in_paris.isoformat()
    assert listed["bookings"][0]["endTimeLocal"] == (nine + timedelta(minutes=30)).isoformat()
