"""The dashboard's real-browser fixtures: one chromium per test module, a live server on the
demo workspace, and ``audit``, which looks at a page at both widths (``tests.browser_pages``)."""

from __future__ import annotations

import os

import pytest

from tests.browser_pages import launched_browser, look_at
from tests.servers import gunicorn, migrate_and_run_demo


@pytest.fixture(scope="module")
def browser():
    with launched_browser() as launched:
        yield launched


@pytest.fixture
def site(postgres_database):
    """A live server on a fresh database with the demo workspace."""
    url = postgres_database()
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key"}
    demo = migrate_and_run_demo(env)
    with gunicorn(url, workers=1) as base:
        yield base, demo


@pytest.fixture
def audit(record_property):
    """``audit(page, name)``: screenshots at laptop and phone widths, and no sideways scroll, no
    axe violation and a header of at most 120 px on the phone; the figures are kept."""
    figures: list[dict] = []
    record_property("page_layout", figures)

    def check(page, name: str) -> None:
        looked = look_at(page, name)
        figures.extend(looked.figures)
        assert looked.problems == [], name

    return check
