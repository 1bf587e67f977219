"""The shell examples of README.md and docs/api.md work as written, against a live server.

Convention (docs/testing.md): a fenced block marked ``sh`` is an example this test runs; any
other language (``console`` for commands such as ``make run``, ``json``, ``python``) is shown,
not run. Every ``sh`` block of a document runs, in order, in one ``bash`` process with
``set -euo pipefail`` (state carries from block to block, as for a reader following along),
with ``BASE`` (the server), ``KEY`` (a fresh demo API key) and ``EVENT_TYPE`` (the demo's
Consultation) exported, in a scratch folder. Every ``curl`` must ask for ``--fail`` (``-f``)
and must get a 2xx, except in a block preceded by ``<!-- expect: STATUS CODE -->``, which must
get that status with that error ``code`` (and 2xx for any other request in it). Statically:
every request an example makes is an operation of the OpenAPI document with only its query
parameters; the README shows the six operations of the specification, docs/api.md every
operation; docs/api.md's table of error codes is the document's.

The examples take their dates from the machine's clock (``python3`` in the shell), which a
shifted test clock (``--clock``) cannot move: on the real clock the shell and the server agree
on any date, and the examples take whatever slots the server offers. So the test is not
``date_sensitive``, and it is skipped if the session's clock is shifted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import time_machine

from app import create_app
from app.extensions import db
from app.services.accounts.demo import ensure_demo
from tests.doc_examples import Block, examples, logical_lines
from tests.servers import ROOT, gunicorn, migrate_and_run_demo

DOCUMENTS = ("README.md", "docs/api.md")
SPEC_OPERATIONS = {
    "checkAvailability",
    "listBookings",
    "getBooking",
    "createBooking",
    "updateBooking",
    "cancelBooking",
}

CURL = re.compile(r"(?:^|[\s(|;&])curl\s")
FAIL_FLAG = re.compile(r"(?<!\S)(?:-[A-Za-z]*f[A-Za-z]*|--fail(?:-with-body)?)(?!\S)")
METHOD = re.compile(r"(?<!\S)-X\s*([A-Z]+)")
URL = re.compile(r'"\$BASE(?P<path>/v1/api/[^"?]*)(?:\?(?P<query>[^"]*))?"')
# What the shell prints for every request (the wrapper's --write-out, on stderr).
HTTP_LINE = re.compile(r"^::http (?P<status>\d{3}) (?P<method>[A-Z]+) (?P<url>\S+)::$", re.M)
BLOCK_MARK = re.compile(r"^::block (\d+)::$", re.M)

PRELUDE = """\
set -euo pipefail
# Every request reports its status (for the test; the examples do not see this).
curl() { command curl "$@" --write-out '%{stderr}::http %{http_code} %{method} %{url_effective}::\\n'; }
"""


@dataclass(frozen=True)
class Request:
    block: Block
    method: str
    path: str
    query: list[str]


def requests_of(block: Block) -> list[Request]:
    found = []
    for line in logical_lines(block.code):
        if not CURL.search(line) or line.lstrip().startswith("#"):
            continue
        method = METHOD.search(line)
        for url in URL.finditer(line):
            names = [part.split("=", 1)[0] for part in (url["query"] or "").split("&") if part]
            found.append(
                Request(block, method[1] if method else "GET", url["path"].rstrip("/"), names)
            )
    return found


def curl_lines(block: Block) -> list[str]:
    return [
        line
        for line in logical_lines(block.code)
        if CURL.search(line) and not line.lstrip().startswith("#")
    ]


# The OpenAPI document, from an app that serves nothing (its database is never connected to:
# nothing listens on port 9)
@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    unused = "postgresql+psycopg://postgres@127.0.0.1:9/unused"
    app = create_app({"SQLALCHEMY_DATABASE_URI": unused, "SECRET_KEY": "x"})
    return app.test_client().get("/v1/api/openapi.json").get_json()


def operation_of(document: dict[str, Any], request: Request) -> dict[str, Any] | None:
    """The OpenAPI operation a request of an example addresses (shell variables stand for the
    path parameters), or None."""
    for template, operations in document["paths"].items():
        pattern = re.sub(r"\\\{[^}]+\\\}", r"[^/]+", re.escape(template))
        if re.fullmatch(pattern, request.path) and request.method.lower() in operations:
            return operations[request.method.lower()]
    return None


def test_the_readme_shows_all_six_operations(openapi):
    shown = {
        operation_of(openapi, request)["operationId"]
        for block in examples("README.md")
        for request in requests_of(block)
        if operation_of(openapi, request)
    }
    assert shown >= SPEC_OPERATIONS, f"missing from the README: {SPEC_OPERATIONS - shown}"


def test_the_api_guide_shows_every_operation(openapi):
    every = {
        op["operationId"]
        for ops in openapi["paths"].values()
        for op in ops.values()
        if isinstance(op, dict) and "operationId" in op
    }
    shown = {
        operation_of(openapi, request)["operationId"]
        for block in examples("docs/api.md")
        for request in requests_of(block)
        if operation_of(openapi, request)
    }
    assert shown == every, f"missing from docs/api.md: {every - shown}"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_example_request_is_a_documented_operation(openapi, document):
    requests = [request for block in examples(document) for request in requests_of(block)]
    assert requests
    for request in requests:
        operation = operation_of(openapi, request)
        where = f"{request.block.where}: {request.method} {request.path}"
        assert operation, f"{where} is no operation of the OpenAPI document"
        known = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert set(request.query) <= known, (
            f"{where}: unknown parameters {set(request.query) - known}"
        )


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_example_request_fails_loudly_unless_it_expects_an_error(document):
    for block in examples(document):
        if block.expect:
            continue
        for line in curl_lines(block):
            assert FAIL_FLAG.search(line), f"{block.where}: curl without --fail (-f): {line}"


def test_the_api_guide_lists_every_error_code_of_the_openapi_document(openapi):
    codes = set(openapi["components"]["schemas"]["Error"]["properties"]["code"]["enum"])
    text = (ROOT / "docs/api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z_]+)` \| \d{3} \|", text, re.M))
    assert listed == codes


# Running the examples
@pytest.fixture(scope="module")
def served(postgres_database: Callable[[], str]) -> Iterator[tuple[str, Callable[[], str], int]]:
    """A gunicorn holding the demo workspace on a fresh database, set up as ``make run`` does
    (``flask db upgrade``, ``flask demo``): its base URL, a function that issues a fresh demo
    key (each document gets a rate-limit budget of its own), and the Consultation's event type
    id. Served as in production (processes sharing Redis)."""
    if time_machine.escape_hatch.is_travelling():
        pytest.skip("the examples read the machine's clock, which --clock does not move")
    url = postgres_database()
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "docs-examples"}
    event_type = migrate_and_run_demo(env).event_types["Consultation"]
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "docs-examples"})

    def issue_key() -> str:
        with app.app_context():
            key = ensure_demo().api_key
            db.session.commit()
            return key

    with gunicorn(url) as base:
        yield base, issue_key, event_type
    with app.app_context():
        db.engine.dispose()


def script_of(blocks: list[Block]) -> str:
    parts = [PRELUDE]
    for number, block in enumerate(blocks):
        parts.append(f"printf '\\n::block {number}::\\n'\n{block.code}")
    parts.append(f"printf '\\n::block {len(blocks)}::\\n'\n")
    return "\n".join(parts)


def outputs_by_block(output: str, count: int) -> list[str]:
    """The output of each block (stdout and stderr), split at the markers."""
    pieces = BLOCK_MARK.split(output)
    by_number = {int(pieces[i]): pieces[i + 1] for i in range(1, len(pieces) - 1, 2)}
    return [by_number.get(number, "") for number in range(count)]


def error_bodies(output: str) -> list[dict[str, Any]]:
    bodies = []
    for line in output.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and "statusCode" in value:
            bodies.append(value)
    return bodies


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_shell_examples_run_against_a_live_server(served, document, tmp_path):
    base, issue_key, event_type = served
    blocks = examples(document)
    script = tmp_path / "examples.sh"
    script.write_text(script_of(blocks))
    result = subprocess.run(
        ["bash", str(script)],
        cwd=tmp_path,
        env={**os.environ, "BASE": base, "KEY": issue_key(), "EVENT_TYPE": str(event_type)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    outputs = outputs_by_block(result.stdout, len(blocks))
    reached = max((int(n) for n in BLOCK_MARK.findall(result.stdout)), default=-1)
    if result.returncode != 0:
        failed = blocks[reached] if 0 <= reached < len(blocks) else None
        pytest.fail(
            f"{document}: the example at {failed.where if failed else '?'} failed "
            f"(exit {result.returncode}):\n{failed.code if failed else ''}\n--- output ---\n"
            f"{outputs[reached] if 0 <= reached < len(blocks) else result.stdout}"
        )
    assert reached == len(blocks), f"{document}: stopped before its end:\n{result.stdout}"

    requests = 0
    for block, output in zip(blocks, outputs, strict=True):
        answers = [(int(m["status"]), m["method"], m["url"]) for m in HTTP_LINE.finditer(output)]
        assert len(answers) == len(curl_lines(block)), f"{block.where}: {output}"
        # A conditional request (If-None-Match) may be answered 304, as documented.
        conditional = {
            answer[2]
            for answer, line in zip(answers, curl_lines(block), strict=True)
            if "If-None-Match" in line and answer[0] == 304
        }
        requests += len(answers)
        if block.expect:
            status, code = block.expect
            refused = [a for a in answers if a[0] == status]
            assert refused, f"{block.where}: expected a {status}, got {answers}"
            assert any(
                body.get("statusCode") == status and body.get("code") == code
                for body in error_bodies(output)
            ), f"{block.where}: expected a {status} with code {code}:\n{output}"
            answers = [a for a in answers if a[0] != status]
        for status, method, url in answers:
            if status == 304 and url in conditional:
                continue
            assert 200 <= status < 300, f"{block.where}: {method} {url} answered {status}"
    assert requests >= len(SPEC_OPERATIONS)
