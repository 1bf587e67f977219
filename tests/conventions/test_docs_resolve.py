"""Docs that cannot drift: every file path, dotted name and make target that the README, the
``docs/`` pages and the app's docstrings name (in code spans: `` `x` `` in Markdown,
``` ``x`` ``` in docstrings) exists, and every link between the pages leads to a file here.

- a path (``app/services/...``, ``tests/factories.py``, ``docs/api.md``) exists from the
  repository's root; a bare file name (``conftest.py``) exists somewhere in the repository;
- a dotted name under ``app``, ``worker`` or ``tests`` imports, attribute by attribute;
- ``make TARGET`` is a target of the Makefile;
- a Markdown link that is not a web address or an anchor leads to a file of the repository
  (nothing links outside it: an ``http`` link may only be an example address or the
  service's own, which the pages write as code, not as links).

A name that only looks like one of these (an example, a removed module told as history) is
written without a code span."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted([*(ROOT / "app").rglob("*.py"), *(ROOT / "worker").rglob("*.py")])
FOLDERS = ("app", "worker", "tests", "docs", "bench", "migrations", ".ci")

_MARKDOWN_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_DOCSTRING_CODE = re.compile(r"``([^`]+)``")
_PATH = re.compile(
    r"^(?:(?:app|worker|tests|docs|bench|migrations|\.ci)/[\w./-]*"
    r"|[\w-]+\.(?:py|md|toml|txt|cfg|ini|json|sh))$"
)
_DOTTED = re.compile(r"^(?:app|worker|tests)(?:\.\w+)+$")
_MAKE = re.compile(r"^make (\w[\w-]*)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@cache
def file_names() -> frozenset[str]:
    names = {path.name for path in ROOT.iterdir()}
    for folder in FOLDERS:
        names |= {path.name for path in (ROOT / folder).rglob("*")}
    return frozenset(names)


def path_exists(text: str) -> bool:
    path = text.split("::")[0].split(":")[0].rstrip("/")
    if "/" not in path:
        return path in file_names()
    return (ROOT / path).exists()


def name_resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute path from the longest importable module."""
    parts = name.split(".")
    for length in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:length]))
        except ImportError:
            continue
        for attribute in parts[length:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


@cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([\w-]+):", text, re.MULTILINE))


def problems(where: str, spans: list[str]) -> Iterator[str]:
    for span in (s.strip() for s in spans):
        if _PATH.match(span) and not path_exists(span):
            yield f"{where}: no file {span}"
        elif _DOTTED.match(span) and not name_resolves(span):
            yield f"{where}: nothing is called {span}"
        target = _MAKE.match(span)
        if target and target.group(1) not in make_targets():
            yield f"{where}: no make target {target.group(1)}"


def page_problems(page: Path, text: str | None = None) -> list[str]:
    """What ``page`` (its text, unless ``text`` is given) names that does not exist."""
    text = page.read_text() if text is None else text
    where = str(page.relative_to(ROOT))
    found = list(problems(where, _MARKDOWN_CODE.findall(text)))
    for link in _LINK.findall(text):
        if link.startswith("#") or link.startswith("mailto:"):
            continue
        if "://" in link:
            found.append(f"{where}: links outside the repository: {link}")
        elif not (page.parent / link.split("#")[0]).exists():
            found.append(f"{where}: the link {link} leads to no file")
    return found


def docstring_problems(source: Path) -> list[str]:
    where = str(source.relative_to(ROOT))
    found = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node)
            if docstring:
                found += problems(where, _DOCSTRING_CODE.findall(docstring))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_path_name_target_and_link_a_page_names_exists(page: Path) -> None:
    assert page_problems(page) == []


def test_every_path_and_name_a_docstring_names_exists() -> None:
    assert [problem for source in SOURCES for problem in docstring_problems(source)] == []


def test_the_check_finds_what_is_gone() -> None:
    page = ROOT / "docs" / "a-page-for-this-test.md"
    text = (
        "See `app/services/gone.py`, `app.services.bookings.no_such_function`, `make gone`,"
        " [the old page](old.md) and [a site](https://example.com/).\n"
    )
    assert page_problems(page, text) == [
        "docs/a-page-for-this-test.md: no file app/services/gone.py",
        "docs/a-page-for-this-test.md: nothing is called app.services.bookings.no_such_function",
        "docs/a-page-for-this-test.md: no make target gone",
        "docs/a-page-for-this-test.md: the link old.md leads to no file",
        "docs/a-page-for-this-test.md: links outside the repository: https://example.com/",
    ]
