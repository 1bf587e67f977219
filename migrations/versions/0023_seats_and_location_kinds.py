"""Seats and location kinds: group slots of up to N bookings, and where a meeting happens

Revision ID: 0023
Revises: 0022

``event_types.seats`` (≥ 1; 1 is one booking a slot, as before) and
``event_types.location_kind`` (``in_person``, ``phone``, ``google_meet``, ``microsoft_teams``,
``link``); a booking copies the kind (``bookings.location_kind``) so the worker that writes it
to a calendar knows whether to ask for a meeting even after the event type changed.

A booking or hold of a seated event type takes a seat of its slot: ``seat_group`` names the
slot (event type id and the slot's bounds: ``app.scheduling.seats.seat_group``),
``seat_number`` which of its ``seat_count`` seats (the event type's seats when it was taken).
The last lines of defence behind the calendar's lock: a partial unique index per table gives
each active seat of a group one row, and a CHECK keeps the number within the count, so a group
never holds more than its seats.

The overlap rules (0002, 0010) become: active bookings (and holds) may overlap only
when they are seats of the same group; ``COALESCE(seat_group, uid)`` (holds: the id) is a key
no two unseated rows share, so everything unseated keeps excluding whatever it overlaps. The
hold/booking triggers let a hold and a booking of the same group share time when their seat
numbers differ.
"""

from alembic import op
import sqlalchemy as sa

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# app.services.common.locking.CALENDAR_WRITE_LOCK
CALENDAR_WRITE_LOCK = 0x0CA1
LOCATION_KINDS = ("in_person", "phone", "google_meet", "microsoft_teams", "link")
KIND_CHECK = f"location_kind IN ({', '.join(repr(kind) for kind in LOCATION_KINDS)})"
SEAT_CHECK = "seat_group IS NULL OR seat_number BETWEEN 1 AND seat_count"
ACTIVE = "status IN ('pending', 'confirmed')"


def _add_seat_columns(table):
    op.add_column(table, sa.Column("seat_group", sa.String(64), nullable=True))
    op.add_column(table, sa.Column("seat_count", sa.Integer(), nullable=True))
    op.add_column(table, sa.Column("seat_number", sa.Integer(), nullable=True))
    op.create_check_constraint("ck_" + table + "_seat", table, SEAT_CHECK)


def _add_kind_column(table):
    op.add_column(
        table,
        sa.Column("location_kind", sa.String(16), nullable=False, server_default="in_person"),
    )
    op.create_check_constraint(f"ck_{table}_location_kind", table, KIND_CHECK)


def _overlap_rules(seated):
    """0002's and 0010's exclusion constraints and triggers, with (``seated``) or without the
    seats of one group sharing their time."""
    bookings_key = ", (COALESCE(seat_group, uid)) WITH <>" if seated else ""
    holds_key = ", (COALESCE(seat_group, id::text)) WITH <>" if seated else ""
    op.execute("ALTER TABLE bookings DROP CONSTRAINT ex_bookings_no_overlap")
    op.execute(
        f"""
        ALTER TABLE bookings ADD CONSTRAINT ex_bookings_no_overlap
        EXCLUDE USING gist (
            sub_account_id WITH =,
            tstzrange(occupied_start, occupied_end, '[)') WITH &&{bookings_key}
        ) WHERE ({ACTIVE})
        """
    )
    op.execute("ALTER TABLE slot_holds DROP CONSTRAINT ex_slot_holds_no_overlap")
    op.execute(
        f"""
        ALTER TABLE slot_holds ADD CONSTRAINT ex_slot_holds_no_overlap
        EXCLUDE USING gist (
            sub_account_id WITH =,
            tstzrange(occupied_start, occupied_end, '[)') WITH &&{holds_key}
        )
        """
    )
    # Another seat of the same group, in the other table: shares the time.
    hold_seat = (
        " AND NOT (b.seat_group IS NOT NULL AND b.seat_group = NEW.seat_group"
        " AND b.seat_number <> NEW.seat_number)"
        if seated
        else ""
    )
    booking_seat = hold_seat.replace("b.", "h.")
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION slot_holds_clear_of_bookings() RETURNS trigger
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock({CALENDAR_WRITE_LOCK}, NEW.sub_account_id);
            IF EXISTS (
                SELECT 1 FROM bookings AS b
                WHERE b.sub_account_id = NEW.sub_account_id
                  AND b.status IN ('pending', 'confirmed')
                  AND tstzrange(b.occupied_start, b.occupied_end, '[)')
                      && tstzrange(NEW.occupied_start, NEW.occupied_end, '[)'){hold_seat}
            ) THEN
                RAISE EXCEPTION 'a slot hold may not overlap an active booking'
                    USING ERRCODE = 'exclusion_violation',
                          CONSTRAINT = 'ex_slot_holds_no_booking_overlap',
                          TABLE = 'slot_holds';
            END IF;
            RETURN NEW;
        END
        $$
        """
    )
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION bookings_clear_of_holds() RETURNS trigger
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            IF NEW.status NOT IN ('pending', 'confirmed') THEN
                RETURN NEW;
            END IF;
            PERFORM pg_advisory_xact_lock({CALENDAR_WRITE_LOCK}, NEW.sub_account_id);
            IF EXISTS (
                SELECT 1 FROM slot_holds AS h
                WHERE h.sub_account_id = NEW.sub_account_id
                  AND tstzrange(h.occupied_start, h.occupied_end, '[)')
                      && tstzrange(NEW.occupied_start, NEW.occupied_end, '[)'){booking_seat}
            ) THEN
                RAISE EXCEPTION 'an active booking may not overlap a slot hold'
                    USING ERRCODE = 'exclusion_violation',
                          CONSTRAINT = 'ex_bookings_no_hold_overlap',
                          TABLE = 'bookings';
            END IF;
            RETURN NEW;
        END
        $$
        """
    )


def upgrade():
    op.add_column(
        "event_types", sa.Column("seats", sa.Integer(), nullable=False, server_default="1")
    )
    op.create_check_constraint("ck_event_types_seats", "event_types", "seats BETWEEN 1 AND 1000")
    _add_kind_column("event_types")
    _add_kind_column("bookings")
    for table in ("bookings", "slot_holds"):
        _add_seat_columns(table)
    op.create_index(
        "uq_bookings_seat",
        "bookings",
        ["seat_group", "seat_number"],
        unique=True,
        postgresql_where=sa.text(ACTIVE),
    )
    op.create_index("uq_slot_holds_seat", "slot_holds", ["seat_group", "seat_number"], unique=True)
    _overlap_rules(seated=True)


def downgrade():
    _overlap_rules(seated=False)
    op.drop_index("uq_slot_holds_seat", table_name="slot_holds")
    op.drop_index("uq_bookings_seat", table_name="bookings")
    for table in ("slot_holds", "bookings"):
        for column in ("seat_number", "seat_count", "seat_group"):
            op.drop_column(table, column)
    op.drop_column("bookings", "location_kind")
    op.drop_column("event_types", "location_kind")
    op.drop_column("event_types", "seats")
