"""Slot holds: time held for a short while by an agent collecting a booking's details

Revision ID: 0010
Revises: 0009

PostgreSQL keeps holds and bookings apart behind the per-calendar advisory lock, as 0002 does
for bookings: an exclusion constraint between the holds of a sub account, and two triggers (a
constraint cannot span two tables) that refuse a hold over an active booking and an active
booking over a hold with the same SQLSTATE as an exclusion constraint (23P01). Each trigger
first takes the calendar's write lock (the application's, ``app.services.common.locking``), and its
check runs in a fresh snapshot after it, so two writers that bypass the application still
cannot both pass. The application deletes expired holds under a write's time before it
writes, so the triggers compare rows only, never clocks.
"""

from alembic import op
import sqlalchemy as sa


revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# app.services.common.locking.CALENDAR_WRITE_LOCK
CALENDAR_WRITE_LOCK = 0x0CA1


def upgrade():
    op.create_table(
        "slot_holds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sub_account_id", sa.Integer(), nullable=False),
        sa.Column("event_type_id", sa.Integer(), nullable=False),
        sa.Column("start_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("occupied_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("occupied_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("token_digest", sa.String(length=64), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("api_key_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("start_at < end_at", name=op.f("ck_slot_holds_interval")),
        sa.CheckConstraint(
            "occupied_start <= start_at AND occupied_end >= end_at",
            name=op.f("ck_slot_holds_occupied_interval"),
        ),
        sa.ForeignKeyConstraint(
            ["sub_account_id"],
            ["sub_accounts.id"],
            name=op.f("fk_slot_holds_sub_account_id_sub_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["event_type_id"],
            ["event_types.id"],
            name=op.f("fk_slot_holds_event_type_id_event_types"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["api_key_id"],
            ["api_keys.id"],
            name=op.f("fk_slot_holds_api_key_id_api_keys"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slot_holds")),
        sa.UniqueConstraint("token_digest", name=op.f("uq_slot_holds_token_digest")),
    )
    op.create_index(
        "ix_slot_holds_sub_account_occupied",
        "slot_holds",
        ["sub_account_id", "occupied_end", "occupied_start"],
        unique=False,
    )
    op.create_index(op.f("ix_slot_holds_event_type_id"), "slot_holds", ["event_type_id"])
    op.create_index(op.f("ix_slot_holds_expires_at"), "slot_holds", ["expires_at"])
    op.create_index(op.f("ix_slot_holds_api_key_id"), "slot_holds", ["api_key_id"])
    op.execute(
        """
        ALTER TABLE slot_holds ADD CONSTRAINT ex_slot_holds_no_overlap
        EXCLUDE USING gist (
            sub_account_id WITH =,
            tstzrange(occupied_start, occupied_end, '[)') WITH &&
        )
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION slot_holds_clear_of_bookings() RETURNS trigger
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock({CALENDAR_WRITE_LOCK}, NEW.sub_account_id);
            IF EXISTS (
                SELECT 1 FROM bookings AS b
                WHERE b.sub_account_id = NEW.sub_account_id
                  AND b.status IN ('pending', 'confirmed')
                  AND tstzrange(b.occupied_start, b.occupied_end, '[)')
                      && tstzrange(NEW.occupied_start, NEW.occupied_end, '[)')
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
        """
        CREATE TRIGGER slot_holds_clear_of_bookings
        BEFORE INSERT OR UPDATE OF sub_account_id, occupied_start, occupied_end ON slot_holds
        FOR EACH ROW EXECUTE FUNCTION slot_holds_clear_of_bookings()
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION bookings_clear_of_holds() RETURNS trigger
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
                      && tstzrange(NEW.occupied_start, NEW.occupied_end, '[)')
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
    op.execute(
        """
        CREATE TRIGGER bookings_clear_of_holds
        BEFORE INSERT OR UPDATE OF sub_account_id, occupied_start, occupied_end, status
        ON bookings FOR EACH ROW EXECUTE FUNCTION bookings_clear_of_holds()
        """
    )


def downgrade():
    op.execute("DROP TRIGGER bookings_clear_of_holds ON bookings")
    op.execute("DROP FUNCTION bookings_clear_of_holds()")
    op.execute("DROP TRIGGER slot_holds_clear_of_bookings ON slot_holds")
    op.execute("DROP FUNCTION slot_holds_clear_of_bookings()")
    op.drop_index(op.f("ix_slot_holds_api_key_id"), table_name="slot_holds")
    op.drop_index(op.f("ix_slot_holds_expires_at"), table_name="slot_holds")
    op.drop_index(op.f("ix_slot_holds_event_type_id"), table_name="slot_holds")
    op.drop_index("ix_slot_holds_sub_account_occupied", table_name="slot_holds")
    op.drop_table("slot_holds")
