"""Compiled dumping (``app.compiled_dump``): every representation dumps exactly as marshmallow's
own ``Schema.dump`` would, through the API and directly; and bookings the API reads as plain
rows (``ShownBooking``) show exactly as the ORM objects would."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from marshmallow import Schema, fields, post_dump

from app.compiled_dump import CompiledSchema
from app.extensions import db
from app.models import SubAccount
from app.representations import BookingSchema, UTCTimestamp
from app.services.bookings.queries import BookingListQuery, get_booking, list_bookings, show_booking
from tests.factories import make_booking, next_monday, ny

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday

BOOKINGS = "/v1/api/calendar/bookings"


@pytest.fixture
def marshmallow_only(monkeypatch: pytest.MonkeyPatch):
    """Within it, every CompiledSchema dumps through marshmallow's own path (the reference)."""

    def use_marshmallow() -> None:
        monkeypatch.setattr(CompiledSchema, "dump", Schema.dump)

    return use_marshmallow


def varied_bookings(tenant) -> list[Any]:
    day = next_monday()
    cancelled = make_booking(
        tenant,
        ny(day, 9),
        status="cancelled",
        emails=("a@example.test", "b@example.test"),
        title="Cleaning with Pat",
        description=None,
        meta={"source": "agent", "n": 3, "ok": True, "none": None},
    )
    cancelled.cancelled_at = cancelled.created_at + timedelta(minutes=5)
    confirmed = make_booking(tenant, ny(day, 11), status="confirmed", emails=("c@example.test",))
    return [cancelled, confirmed, make_booking(tenant, ny(day, 13), location="Room 4")]


def test_a_booking_dumps_as_marshmallow_would(app, tenant, marshmallow_only):
    bookings = varied_bookings(tenant)
    compiled = [BookingSchema().dump(b) for b in bookings]
    marshmallow_only()
    assert compiled == [BookingSchema().dump(b) for b in bookings]


def test_the_apis_reads_answer_as_marshmallow_would(app, client, tenant, marshmallow_only):
    ids = [b.id for b in varied_bookings(tenant)]
    day = next_monday()
    paths = [
        f"{BOOKINGS}?limit=50",
        *(f"{BOOKINGS}/{booking_id}" for booking_id in ids),
        f"/v1/api/calendar/availability?startDate={day}&endDate={day + timedelta(days=6)}"
        f"&eventTypeId={tenant.event_types['Cleaning']}",
    ]
    compiled = [client.get(path, headers=tenant.headers()).get_json() for path in paths]
    marshmallow_only()
    reference = [client.get(path, headers=tenant.headers()).get_json() for path in paths]
    assert compiled == reference
    assert compiled[0]["bookings"] and any(day["slots"] for day in compiled[-1])


class Unusual(CompiledSchema):
    """Fields only marshmallow knows how to dump, and a default for an absent value."""

    upper = fields.Method("shout")
    constant = fields.Constant("always")
    absent = fields.String(dump_default="fallback")
    when = UTCTimestamp(allow_none=True)
    tags = fields.List(fields.String())
    label = fields.String(data_key="Label")

    def shout(self, obj: dict[str, Any]) -> str:
        return obj["label"].upper()


class Hooked(CompiledSchema):
    label = fields.String()

    @post_dump
    def mark(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {**data, "hooked": True}


class Dotted(CompiledSchema):
    inner = fields.String(attribute="outer.inner")


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (Unusual(), {"label": "x", "when": None, "tags": ["a", None]}),
        (Unusual(many=True), [{"label": "y", "when": None, "tags": []}]),
        (Hooked(), {"label": "z"}),
        (Dotted(), {"outer": {"inner": "deep"}}),
    ],
    ids=["method-constant-default", "many", "post-dump-hook", "dotted-attribute"],
)
def test_fields_and_hooks_without_a_converter_dump_as_marshmallow_would(
    schema, value, marshmallow_only
):
    compiled = schema.dump(value)
    marshmallow_only()
    assert compiled == schema.dump(value)


def sub_account(tenant) -> SubAccount:
    return db.session.get(SubAccount, tenant.sub_account_id)


def test_a_booking_read_as_plain_rows_shows_as_the_orm_object_does(app, tenant):
    for booking in varied_bookings(tenant):
        db.session.commit()
        orm = BookingSchema().dump(get_booking(sub_account(tenant), booking.id))
        assert BookingSchema().dump(show_booking(sub_account(tenant), booking.id)) == orm


def test_a_page_read_as_plain_rows_shows_as_the_orm_objects_do(app, tenant):
    varied_bookings(tenant)
    db.session.commit()
    page, total = list_bookings(sub_account(tenant), BookingListQuery())
    orm = [BookingSchema().dump(get_booking(sub_account(tenant), b.id)) for b in page]
    assert total == 3
    assert BookingSchema(many=True).dump(page) == orm
