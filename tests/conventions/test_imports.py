"""The layers' direction holds where ``lint-imports`` (the import contract in ``pyproject.toml``,
run by CI) cannot look: what importing a package actually loads, and what services may use of
Flask. Importing the pure rules, the HTTP client, the API's published terms or the MCP server
must not load the application."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("flask", "sqlalchemy", "celery", "marshmallow", "psycopg", "gevent", "caldav", "redis")


def modules_loaded_by(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``statement``."""
    program = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def top_level(modules: list[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.mark.parametrize(
    "package",
    [
        "app.scheduling",
        "app.scheduling.slots",
        "app.client",
        "app.api_terms",
        "app.mcp.server",
        "app.mcp.__main__",
    ],
)
def test_importing_loads_no_framework_database_or_task_queue(package):
    loaded = top_level(modules_loaded_by(f"import {package}"))
    assert not loaded & set(HEAVY)


def is_standard_library(name: str) -> bool:
    # sysconfig's generated data module is the standard library's, under a platform's name.
    return name in sys.stdlib_module_names or name.startswith("_sysconfigdata_")


def test_the_scheduling_rules_load_only_the_standard_library():
    at_start = top_level(modules_loaded_by("pass"))  # __main__, site's hooks
    loaded = top_level(modules_loaded_by("import app.scheduling.slots, app.scheduling.suggestions"))
    assert {name for name in loaded - at_start if not is_standard_library(name)} == {"app"}


def test_the_api_terms_load_only_the_standard_library():
    new = set(modules_loaded_by("import app.api_terms")) - set(modules_loaded_by("pass"))
    assert {name for name in new if not is_standard_library(name.split(".")[0])} == {
        "app",
        "app.api_terms",
    }


def test_the_http_client_loads_nothing_else_of_the_app():
    loaded = modules_loaded_by("import app.client")
    app_modules = {name for name in loaded if name == "app" or name.startswith("app.")}
    assert all(
        name in ("app", "app.client") or name.startswith("app.client.") for name in app_modules
    )


def test_the_mcp_server_loads_only_the_client_and_the_api_terms():
    """The MCP server is a client of the API over HTTP: its command (``python -m app.mcp``)
    loads the client and the published terms, never the services behind the API (it loaded
    about eighty modules of the app, Flask and SQLAlchemy when it read three constants from
    the services)."""
    loaded = modules_loaded_by("import app.mcp.__main__")
    app_modules = {name for name in loaded if name == "app" or name.startswith("app.")}
    assert "app.mcp.server" in app_modules
    assert {
        name
        for name in app_modules
        if name not in ("app", "app.api_terms") and not name.startswith(("app.client", "app.mcp"))
    } == set()


# What a use case may not touch: the request it happens to serve, or how an answer is shown.
WEB_ONLY = {"request", "session", "g", "render_template", "render_template_string", "redirect"}


def flask_web_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "flask":
            found += [
                f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name in WEB_ONLY
            ]
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "flask"
            and node.attr in WEB_ONLY
        ):
            found.append(f"{path.name}:{node.lineno} flask.{node.attr}")
    return found


def test_services_never_read_the_request_or_render_pages():
    services = sorted((ROOT / "app" / "services").rglob("*.py"))
    assert services
    assert [use for path in services for use in flask_web_uses(path)] == []


def test_the_web_use_check_finds_a_request_read(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import flask\nfrom flask import request, current_app\nx = flask.session\n")
    assert flask_web_uses(sample) == ["sample.py:2 request", "sample.py:3 flask.session"]
