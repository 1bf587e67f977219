"""A collective booking's other hosts are kept from double booking by the database too

Revision ID: 0034
Revises: 0033

The bookings' exclusion constraint (0029) keeps each booking's first host (``host_id``) from
overlapping itself; a collective booking's other hosts are ``booking_hosts`` rows (0033),
which no constraint can join to the bookings' ranges. So triggers do, as 0010's do for holds
against bookings, under the calendar's write lock: an active booking may not overlap another
active booking that any of its hosts is also a host of. They run when a host is added to a
booking (``booking_hosts``) and when a booking is made, moved, reactivated or given another
first host; the error is the bookings' own (``ex_bookings_no_overlap``), which the writes
already answer as a conflict.
"""

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None

# app.services.common.locking.CALENDAR_WRITE_LOCK
CALENDAR_WRITE_LOCK = 0x0CA1

# An active booking of ``host`` other than ``booking``, overlapping ``range`` (first host or
# another host of it).
OTHERS_OF_HOST = """
    SELECT 1 FROM bookings AS o
    WHERE o.id <> {booking}
      AND o.status IN ('pending', 'confirmed')
      AND tstzrange(o.occupied_start, o.occupied_end, '[)') && {range}
      AND (o.host_id = {host} OR EXISTS (
          SELECT 1 FROM booking_hosts AS x WHERE x.booking_id = o.id AND x.host_id = {host}
      ))
"""


def upgrade():
    mine = "tstzrange(b.occupied_start, b.occupied_end, '[)')"
    op.execute(
        f"""
        CREATE FUNCTION collective_hosts_clear(booking_id integer) RETURNS void
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            b bookings%ROWTYPE;
        BEGIN
            SELECT * INTO b FROM bookings WHERE id = booking_id;
            IF NOT FOUND OR b.status NOT IN ('pending', 'confirmed') THEN
                RETURN;
            END IF;
            PERFORM pg_advisory_xact_lock({CALENDAR_WRITE_LOCK}, b.sub_account_id);
            IF EXISTS (
                SELECT 1 FROM booking_hosts AS h
                WHERE h.booking_id = b.id AND EXISTS (
                    {OTHERS_OF_HOST.format(booking="b.id", range=mine, host="h.host_id")}
                )
            ) OR EXISTS (
                {OTHERS_OF_HOST.format(booking="b.id", range=mine, host="b.host_id")}
                  AND EXISTS (
                      SELECT 1 FROM booking_hosts AS y
                      WHERE y.booking_id = o.id AND y.host_id = b.host_id
                  )
            ) THEN
                RAISE EXCEPTION 'a host may not have two overlapping active bookings'
                    USING ERRCODE = 'exclusion_violation',
                          CONSTRAINT = 'ex_bookings_no_overlap',
                          TABLE = 'bookings';
            END IF;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION booking_hosts_clear() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM collective_hosts_clear(NEW.booking_id);
            RETURN NULL;
        END
        $$;
        CREATE TRIGGER booking_hosts_clear AFTER INSERT OR UPDATE ON booking_hosts
        FOR EACH ROW EXECUTE FUNCTION booking_hosts_clear();
        CREATE FUNCTION bookings_collective_clear() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM collective_hosts_clear(NEW.id);
            RETURN NULL;
        END
        $$;
        CREATE TRIGGER bookings_collective_clear
        AFTER INSERT OR UPDATE OF host_id, occupied_start, occupied_end, status ON bookings
        FOR EACH ROW EXECUTE FUNCTION bookings_collective_clear();
        """
    )


def downgrade():
    op.execute(
        """
        DROP TRIGGER bookings_collective_clear ON bookings;
        DROP FUNCTION bookings_collective_clear();
        DROP TRIGGER booking_hosts_clear ON booking_hosts;
        DROP FUNCTION booking_hosts_clear();
        DROP FUNCTION collective_hosts_clear(integer);
        """
    )
