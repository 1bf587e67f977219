"""Booking counts per local day: what caps count, kept by the bookings' own writes

Revision ID: 0024
Revises: 0023

``booking_day_counts``: per sub account, event type and local day (the sub account's
timezone), how many active (pending, confirmed) bookings start that day and their minutes.
Availability with caps reads it (a few dozen rows) instead of summing a month or two of bookings
for every answer (``app.services.scheduling_inputs.BookingCaps``).

PostgreSQL keeps it exact with triggers, whatever writes the bookings: a booking's row leaving
the active statuses, changing its time, event type or sub account takes its count back from the
day it was on, and one entering or staying active adds it to its day, in the same transaction
(so under the calendar's lock a tally reads what the writes before it made). A change of the
sub account's timezone moves every day, so it recounts that sub account. The table starts from
the bookings already stored.
"""

from alembic import op
import sqlalchemy as sa

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

ACTIVE = "status IN ('pending', 'confirmed')"
# A booking's minutes as the tally counts them (whole minutes, rounded down).
MINUTES = "floor(extract(epoch FROM {0}.end_at - {0}.start_at) / 60)::int"
LOCAL_DAY = "booking_local_day({0}.sub_account_id, {0}.start_at)"


def upgrade():
    op.create_table(
        "booking_day_counts",
        sa.Column("sub_account_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("event_type_id", sa.Integer(), nullable=False),
        sa.Column("bookings", sa.Integer(), nullable=False),
        sa.Column("minutes", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["sub_account_id"],
            ["sub_accounts.id"],
            name=op.f("fk_booking_day_counts_sub_account_id_sub_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "sub_account_id", "day", "event_type_id", name=op.f("pk_booking_day_counts")
        ),
    )
    op.execute(
        """
        CREATE FUNCTION booking_local_day(account integer, instant timestamptz) RETURNS date
        LANGUAGE sql STABLE AS $$
            SELECT timezone(
                COALESCE(
                    (SELECT timezone FROM calendar_settings WHERE sub_account_id = account), 'UTC'
                ),
                instant
            )::date
        $$
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION booking_day_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'INSERT' AND OLD.{ACTIVE} THEN
                UPDATE booking_day_counts AS c
                SET bookings = c.bookings - 1, minutes = c.minutes - {MINUTES.format("OLD")}
                WHERE c.sub_account_id = OLD.sub_account_id
                  AND c.day = {LOCAL_DAY.format("OLD")}
                  AND c.event_type_id = OLD.event_type_id;
            END IF;
            IF TG_OP <> 'DELETE' AND NEW.{ACTIVE} THEN
                INSERT INTO booking_day_counts AS c
                    (sub_account_id, day, event_type_id, bookings, minutes)
                VALUES (
                    NEW.sub_account_id, {LOCAL_DAY.format("NEW")}, NEW.event_type_id, 1,
                    {MINUTES.format("NEW")}
                )
                ON CONFLICT (sub_account_id, day, event_type_id) DO UPDATE
                SET bookings = c.bookings + 1, minutes = c.minutes + excluded.minutes;
            END IF;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER booking_day_counts_follow
        AFTER INSERT OR DELETE
            OR UPDATE OF status, start_at, end_at, event_type_id, sub_account_id
        ON bookings FOR EACH ROW EXECUTE FUNCTION booking_day_counts_follow()
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION booking_day_counts_recount() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM booking_day_counts WHERE sub_account_id = NEW.sub_account_id;
            INSERT INTO booking_day_counts (sub_account_id, day, event_type_id, bookings, minutes)
            SELECT b.sub_account_id, timezone(NEW.timezone, b.start_at)::date, b.event_type_id,
                   count(*), sum({MINUTES.format("b")})
            FROM bookings AS b
            WHERE b.sub_account_id = NEW.sub_account_id AND b.{ACTIVE}
            GROUP BY 1, 2, 3;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER booking_day_counts_recount_insert
        AFTER INSERT ON calendar_settings
        FOR EACH ROW EXECUTE FUNCTION booking_day_counts_recount()
        """
    )
    op.execute(
        """
        CREATE TRIGGER booking_day_counts_recount_update
        AFTER UPDATE OF timezone ON calendar_settings
        FOR EACH ROW WHEN (OLD.timezone IS DISTINCT FROM NEW.timezone)
        EXECUTE FUNCTION booking_day_counts_recount()
        """
    )
    op.execute(
        f"""
        INSERT INTO booking_day_counts (sub_account_id, day, event_type_id, bookings, minutes)
        SELECT b.sub_account_id, {LOCAL_DAY.format("b")}, b.event_type_id, count(*),
               sum({MINUTES.format("b")})
        FROM bookings AS b
        WHERE b.{ACTIVE}
        GROUP BY 1, 2, 3
        """
    )


def downgrade():
    op.execute("DROP TRIGGER booking_day_counts_recount_update ON calendar_settings")
    op.execute("DROP TRIGGER booking_day_counts_recount_insert ON calendar_settings")
    op.execute("DROP FUNCTION booking_day_counts_recount()")
    op.execute("DROP TRIGGER booking_day_counts_follow ON bookings")
    op.execute("DROP FUNCTION booking_day_counts_follow()")
    op.execute("DROP FUNCTION booking_local_day(integer, timestamptz)")
    op.drop_table("booking_day_counts")
