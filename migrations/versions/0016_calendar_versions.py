"""Calendar versions: every change that can move availability gives the calendar a new version

Revision ID: 0016
Revises: 0015

``calendar_versions`` holds one row per sub account whose calendar has changed: its version, a
random 63-bit number drawn anew by every change (``app/models/calendar_version.py`` says why
random). Triggers draw it, in the transaction of the change, whichever code made it:

* ``bookings``: a row inserted or deleted, or its status, occupied time or sub account changed;
* ``slot_holds``, ``availability_profiles``, ``event_types``: any row inserted, changed or
  deleted;
* ``blocked_times`` (blocked time and connected calendars' busy time): a row inserted or
  deleted, or its times, source or sub account changed;
* ``weekly_hours`` and ``date_overrides``: any change, for the sub account of their profile;
* ``calendar_settings``: a change of the timezone, default duration, minimum notice or booking
  horizon.
"""

from alembic import op
import sqlalchemy as sa


revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# Where a row's sub account is found: on the row, or on the row's availability profile.
ON_ROW = "on_row"
VIA_PROFILE = "via_profile"

# Table: (where its sub account is, the columns whose update moves availability; None: any).
INPUTS = {
    "bookings": (ON_ROW, ["sub_account_id", "status", "occupied_start", "occupied_end"]),
    "slot_holds": (ON_ROW, None),
    "blocked_times": (ON_ROW, ["sub_account_id", "start_at", "end_at", "source"]),
    "availability_profiles": (ON_ROW, None),
    "weekly_hours": (VIA_PROFILE, None),
    "date_overrides": (VIA_PROFILE, None),
    "event_types": (ON_ROW, None),
    "calendar_settings": (
        ON_ROW,
        ["timezone", "default_duration", "minimum_notice_minutes", "booking_horizon_days"],
    ),
}

POSTGRES_RANDOM = "floor(random() * 4611686018427387904)::bigint"


def _trigger_name(table, event):
    return f"calendar_version_{table}_{event}"


def _create_postgres():
    op.execute(
        f"""
        CREATE FUNCTION calendar_input_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            changed record;
        BEGIN
            IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
            IF TG_ARGV[0] = '{VIA_PROFILE}' THEN
                INSERT INTO calendar_versions (sub_account_id, version)
                SELECT sub_account_id, {POSTGRES_RANDOM}
                FROM availability_profiles WHERE id = changed.profile_id
                ON CONFLICT (sub_account_id) DO UPDATE SET version = excluded.version;
            ELSE
                INSERT INTO calendar_versions (sub_account_id, version)
                VALUES (changed.sub_account_id, {POSTGRES_RANDOM})
                ON CONFLICT (sub_account_id) DO UPDATE SET version = excluded.version;
            END IF;
            RETURN NULL;
        END
        $$
        """
    )
    for table, (where, columns) in INPUTS.items():
        update = "UPDATE" if columns is None else f"UPDATE OF {', '.join(columns)}"
        op.execute(
            f"CREATE TRIGGER {_trigger_name(table, 'change')}"
            f" AFTER INSERT OR {update} OR DELETE ON {table}"
            f" FOR EACH ROW EXECUTE FUNCTION calendar_input_changed('{where}')"
        )


def upgrade():
    op.create_table(
        "calendar_versions",
        sa.Column("sub_account_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("sub_account_id", name=op.f("pk_calendar_versions")),
    )
    _create_postgres()


def downgrade():
    for table in INPUTS:
        op.execute(f"DROP TRIGGER {_trigger_name(table, 'change')} ON {table}")
    op.execute("DROP FUNCTION calendar_input_changed()")
    op.drop_table("calendar_versions")
