"""Hosts: the people (or rooms) a sub account's bookings are made with

Revision ID: 0029
Revises: 0028

A sub account was one calendar. Now it has hosts (``hosts``: a name, an email for their
notifications, a timezone, their own availability profile, optionally the dashboard user who
is this host), and what occupies time belongs to a host:

- every connected calendar is one host's (``calendar_connections.host_id``);
- every booking and every hold occupies one host's time (``bookings.host_id``,
  ``slot_holds.host_id``);
- blocked time may be one host's, or everyone's (``blocked_times.host_id``, NULL: everyone).

Every existing sub account gets one host, named after it, with its notification email, and
everything it has moves onto that host: the API answers as before.

The overlap rules (0002, 0010, 0023) are now per host: two active bookings of one host never
overlap (seats of one group excepted), and two hosts may be booked at the same instant. A row
written without a host (every write before teams, a script) takes the sub account's first
host (``hosts_default``, a BEFORE INSERT trigger), so the one-host case needs no host named.
Writes still take the sub account's lock (``CALENDAR_WRITE_LOCK``), which serializes every
host's writes of the sub account: coarser than needed, never less safe.
"""

from alembic import op
import sqlalchemy as sa

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

# app.services.common.locking.CALENDAR_WRITE_LOCK
CALENDAR_WRITE_LOCK = 0x0CA1
ACTIVE = "status IN ('pending', 'confirmed')"
OCCUPYING = ("bookings", "slot_holds", "calendar_connections")


def _overlap_rules(key):
    """0023's exclusion constraints and hold/booking triggers, with rows of one ``key``
    (``host_id`` now, ``sub_account_id`` before) excluding each other. The constraints lead
    with the sub account either way (a host is one sub account's, so the rule is the same),
    so that their indexes still serve a sub account's busy time in a window."""
    columns = "sub_account_id WITH =" + (f", {key} WITH =" if key != "sub_account_id" else "")
    op.execute("ALTER TABLE bookings DROP CONSTRAINT ex_bookings_no_overlap")
    op.execute(
        f"""
        ALTER TABLE bookings ADD CONSTRAINT ex_bookings_no_overlap
        EXCLUDE USING gist (
            {columns},
            tstzrange(occupied_start, occupied_end, '[)') WITH &&,
            (COALESCE(seat_group, uid)) WITH <>
        ) WHERE ({ACTIVE})
        """
    )
    op.execute("ALTER TABLE slot_holds DROP CONSTRAINT ex_slot_holds_no_overlap")
    op.execute(
        f"""
        ALTER TABLE slot_holds ADD CONSTRAINT ex_slot_holds_no_overlap
        EXCLUDE USING gist (
            {columns},
            tstzrange(occupied_start, occupied_end, '[)') WITH &&,
            (COALESCE(seat_group, id::text)) WITH <>
        )
        """
    )
    hold_seat = (
        " AND NOT (b.seat_group IS NOT NULL AND b.seat_group = NEW.seat_group"
        " AND b.seat_number <> NEW.seat_number)"
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
                WHERE b.{key} = NEW.{key}
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
                WHERE h.{key} = NEW.{key}
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


def _check_triggers_on(host):
    """The hold/booking checks run again when a row's host changes (``host`` is
    ``", host_id"``) or not (``""``, before)."""
    op.execute(
        f"""
        DROP TRIGGER slot_holds_clear_of_bookings ON slot_holds;
        CREATE TRIGGER slot_holds_clear_of_bookings
        BEFORE INSERT OR UPDATE OF sub_account_id{host}, occupied_start, occupied_end
        ON slot_holds FOR EACH ROW EXECUTE FUNCTION slot_holds_clear_of_bookings();
        DROP TRIGGER bookings_clear_of_holds ON bookings;
        CREATE TRIGGER bookings_clear_of_holds
        BEFORE INSERT OR UPDATE OF sub_account_id{host}, occupied_start, occupied_end, status
        ON bookings FOR EACH ROW EXECUTE FUNCTION bookings_clear_of_holds();
        """
    )


def upgrade():
    op.create_table(
        "hosts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sub_account_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("availability_profile_id", sa.Integer(), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["sub_account_id"],
            ["sub_accounts.id"],
            name=op.f("fk_hosts_sub_account_id_sub_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["availability_profile_id"],
            ["availability_profiles.id"],
            name=op.f("fk_hosts_availability_profile_id_availability_profiles"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_hosts_user_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosts")),
        sa.UniqueConstraint("sub_account_id", "name", name=op.f("uq_hosts_sub_account_id_name")),
    )
    op.create_index(op.f("ix_hosts_availability_profile_id"), "hosts", ["availability_profile_id"])
    op.create_index(op.f("ix_hosts_user_id"), "hosts", ["user_id"])
    op.execute(
        """
        INSERT INTO hosts (sub_account_id, name, email, created_at)
        SELECT s.id, s.name, c.notification_email, s.created_at
        FROM sub_accounts AS s LEFT JOIN calendar_settings AS c ON c.sub_account_id = s.id
        """
    )
    op.execute(
        """
        CREATE FUNCTION hosts_default() RETURNS trigger
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            IF NEW.host_id IS NULL THEN
                SELECT id INTO NEW.host_id FROM hosts
                WHERE sub_account_id = NEW.sub_account_id ORDER BY id LIMIT 1;
                IF NEW.host_id IS NULL THEN
                    RAISE EXCEPTION 'sub account % has no host', NEW.sub_account_id
                        USING ERRCODE = 'not_null_violation';
                END IF;
            END IF;
            RETURN NEW;
        END
        $$
        """
    )
    for table in OCCUPYING:
        op.add_column(table, sa.Column("host_id", sa.Integer(), nullable=True))
        op.execute(
            f"""
            UPDATE {table} AS t SET host_id = h.id FROM hosts AS h
            WHERE h.sub_account_id = t.sub_account_id
            """
        )
        op.alter_column(table, "host_id", nullable=False)
        op.create_foreign_key(
            op.f(f"fk_{table}_host_id_hosts"),
            table,
            "hosts",
            ["host_id"],
            ["id"],
            ondelete="RESTRICT",
        )
        op.create_index(op.f(f"ix_{table}_host_id"), table, ["host_id"])
        # Before the hold/booking checks, which compare hosts (triggers fire by name).
        op.execute(
            f"""
            CREATE TRIGGER a_{table}_host_default BEFORE INSERT ON {table}
            FOR EACH ROW EXECUTE FUNCTION hosts_default()
            """
        )
    op.add_column("blocked_times", sa.Column("host_id", sa.Integer(), nullable=True))
    op.create_foreign_key(
        op.f("fk_blocked_times_host_id_hosts"),
        "blocked_times",
        "hosts",
        ["host_id"],
        ["id"],
        ondelete="CASCADE",
    )
    op.create_index(op.f("ix_blocked_times_host_id"), "blocked_times", ["host_id"])
    _overlap_rules("host_id")
    _check_triggers_on(", host_id")


def downgrade():
    _check_triggers_on("")
    _overlap_rules("sub_account_id")
    op.drop_index(op.f("ix_blocked_times_host_id"), table_name="blocked_times")
    op.drop_constraint(op.f("fk_blocked_times_host_id_hosts"), "blocked_times")
    op.drop_column("blocked_times", "host_id")
    for table in OCCUPYING:
        op.execute(f"DROP TRIGGER a_{table}_host_default ON {table}")
        op.drop_index(op.f(f"ix_{table}_host_id"), table_name=table)
        op.drop_constraint(op.f(f"fk_{table}_host_id_hosts"), table)
        op.drop_column(table, "host_id")
    op.execute("DROP FUNCTION hosts_default()")
    op.drop_table("hosts")
