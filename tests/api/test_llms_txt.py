"""``GET /llms.txt``: the agents' discovery document names the service's own base URL (from
``PUBLIC_URL``, whatever the request's ``Host``), every operation with one worked example (the
same commands docs/api.md runs against a live server), the error codes the API documents, and
the OpenAPI document and the MCP server."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.services.common.errors import ErrorCode
from tests.doc_examples import examples, fenced_blocks, normalized

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_URL = "https://calendar.example.test"
HEADING = re.compile(r"^### .*: (GET|POST|PUT|DELETE) (/calendar/\S+) \(", re.M)
CODE_ROW = re.compile(r"^\| `([a-z_]+)` \| \d{3} \| .*\|$", re.M)


@pytest.fixture
def make_app() -> Callable[..., Flask]:
    """Apps that never touch their database (nothing listens on port 9): /llms.txt reads only
    the configuration."""

    def make(**config: Any) -> Flask:
        return create_app(
            {
                "TESTING": True,
                "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://postgres@127.0.0.1:9/unused",
                "SECRET_KEY": "test",
                "PUBLIC_URL": PUBLIC_URL,
                **config,
            }
        )

    return make


@pytest.fixture
def llms(make_app: Callable[..., Flask]) -> str:
    answer = make_app().test_client().get("/llms.txt")
    assert answer.status_code == 200
    return answer.get_data(as_text=True)


@pytest.fixture
def openapi(make_app: Callable[..., Flask]) -> dict[str, Any]:
    return make_app().test_client().get("/v1/api/openapi.json").get_json()


def shape(path: str) -> str:
    """A path with its parameters' names blanked: ``/bookings/{booking_id}`` → ``/bookings/{}``."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def test_it_answers_plain_text_markdown_without_a_key_or_a_rate_limit(make_app):
    answer = make_app().test_client().get("/llms.txt")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert answer.get_data(as_text=True).startswith("# Calendar Booking API\n\n> ")
    assert "X-RateLimit-Limit" not in answer.headers
    assert "{{" not in answer.get_data(as_text=True)


def test_the_base_url_is_public_url_whatever_the_host_says(make_app):
    answer = make_app().test_client().get("/llms.txt", headers={"Host": "evil.test"})
    text = answer.get_data(as_text=True)
    assert f"Base URL: {PUBLIC_URL}/v1/api " in text
    assert "evil.test" not in text and "localhost" not in text


def test_a_public_url_with_a_path_prefixes_every_link(make_app):
    text = make_app(PUBLIC_URL="https://example.test/booking").test_client().get("/llms.txt").text
    assert "Base URL: https://example.test/booking/v1/api " in text
    assert "(https://example.test/booking/v1/api/openapi.json)" in text
    assert '"https://example.test/booking/v1/api/calendar/bookings/$ID"' in text


def test_every_operation_of_the_api_has_a_section(llms, openapi):
    documented = {
        (method.upper(), shape(path.removeprefix("/v1/api")))
        for path, operations in openapi["paths"].items()
        for method, operation in operations.items()
        if isinstance(operation, dict) and "operationId" in operation
    }
    listed = {(method, shape(path)) for method, path in HEADING.findall(llms)}
    assert listed == documented


def test_each_operation_has_one_worked_example_and_it_is_docs_api_md_s(llms):
    blocks = [block for block in fenced_blocks(llms, "/llms.txt") if block.language == "sh"]
    assert len(blocks) == len(HEADING.findall(llms))
    guide = normalized("".join(block.code for block in examples("docs/api.md")))
    for block in blocks:
        assert PUBLIC_URL + "/v1/api/calendar/" in block.code
        command = normalized(block.code.replace(PUBLIC_URL, "$BASE"))
        assert command in guide, f"not a command of docs/api.md:\n{block.code}"


def test_the_error_codes_are_those_the_api_documents(llms, openapi):
    listed = CODE_ROW.findall(llms)
    assert len(listed) == len(set(listed))
    assert set(listed) == set(
        openapi["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
    )
    assert set(listed) == {code.value for code in ErrorCode}


def test_the_error_table_reads_as_docs_api_md_s(llms):
    guide = (ROOT / "docs/api.md").read_text(encoding="utf-8")
    rows = [match.group(0) for match in CODE_ROW.finditer(llms)]
    assert rows == [match.group(0) for match in CODE_ROW.finditer(guide)]


def test_it_links_the_openapi_document_and_the_docs_and_names_the_mcp_server(llms):
    assert f"]({PUBLIC_URL}/v1/api/openapi.json)" in llms
    assert f"]({PUBLIC_URL}/v1/api/docs)" in llms
    assert f"CALENDAR_API_URL={PUBLIC_URL}/v1/api python -m app.mcp --http" in llms
    assert "`/mcp`" in llms and "x-calendar-api-key" in llms


def test_it_names_authentication_permissions_and_limits(llms):
    for fact in (
        "`x-calendar-api-key`",
        "`canCheckAvailability`",
        "`canGetBookings`",
        "`canBook`",
        "`canCancel`",
        "60 requests per sliding minute",
        "1 MiB",
        "`Retry-After`",
    ):
        assert fact in llms
