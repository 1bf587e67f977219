"""What people expect to see (issue 29, item 4): the overview's upcoming bookings are the
active ones (cancelled ones behind a filter), each demo run leaves one demo key active and names
it in the sub account's time, and the site has an icon."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine
from sqlalchemy import select

from app.extensions import db
from app.models import ApiKey
from app.services.accounts.demo import ensure_demo
from tests.dashboard_users import owner_email, sign_in
from tests.factories import make_booking

LATER = datetime(2031, 1, 7, 15, tzinfo=UTC)  # far ahead of any day the tests run on


@pytest.fixture
def overview(client, tenant):
    sign_in(client, owner_email(tenant))
    return f"/dashboard/s/{tenant.sub_account_id}/"


def test_the_overview_lists_only_active_upcoming_bookings(client, tenant, overview):
    make_booking(tenant, LATER, title="Kept appointment")
    make_booking(tenant, LATER.replace(hour=17), title="Called off", status="cancelled")
    db.session.commit()
    page = client.get(overview).get_data(as_text=True)
    assert "Kept appointment" in page and "Called off" not in page
    assert "Show cancelled ones too" in page


def test_cancelled_upcoming_bookings_show_behind_the_filter(client, tenant, overview):
    make_booking(tenant, LATER, title="Called off", status="cancelled")
    db.session.commit()
    page = client.get(overview + "?cancelled=1").get_data(as_text=True)
    assert "Called off" in page and "Show active ones only" in page


def test_the_site_has_an_icon(client):
    icon = client.get("/favicon.ico")
    assert (icon.status_code, icon.mimetype) == (200, "image/svg+xml")
    assert icon.data.startswith(b"<svg")


def test_each_demo_run_leaves_only_its_own_demo_key_active(app):
    ensure_demo()
    db.session.commit()
    ensure_demo()
    db.session.commit()
    keys = db.session.scalars(select(ApiKey).order_by(ApiKey.id)).all()
    assert [k.active for k in keys] == [False, True]


@time_machine.travel(datetime(2031, 1, 7, 15, 4, 5, tzinfo=UTC), tick=False)
def test_the_demo_key_is_named_in_the_sub_accounts_time(app):
    ensure_demo()
    db.session.commit()
    key = db.session.scalars(select(ApiKey)).one()
    assert key.name == "demo 2031-01-07 10:04:05"  # New York, where the demo clinic is
