"""Round robin: an event type's hosts, and why a booking has its host

Revision ID: 0032
Revises: 0031

``event_types.assignment``: ``single`` (its one host, ``event_types.host_id``: every event type
so far), ``round_robin`` (one of its hosts, chosen per booking) or ``collective`` (all of
them). ``event_types.max_ahead``: round robin's optional "too far ahead" bound.
``event_type_hosts``: the hosts of a round-robin or collective type, each with its priority
(0–4), weight (1–1000) and since when it has been eligible (fairness calibrates a host that
joined during the counting window). ``bookings.assignment_reason``: why the booking has its
host (``single`` for every booking so far); ``slot_holds.assignment_reason`` likewise, which
the booking made from the hold takes.

Both new inputs of availability give the calendar a new version (0016's triggers): ``hosts``
(on the row) and ``event_type_hosts`` (through its event type, ``calendar_input_changed_via``:
the sub account of the row a column of the changed row names).
"""

from alembic import op
import sqlalchemy as sa

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

ASSIGNMENTS = ("single", "round_robin", "collective")
REASONS = ("single", "requested", "priority", "weight", "least_recently_booked", "collective")


def _in(column, values):
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


POSTGRES_RANDOM = "floor(random() * 4611686018427387904)::bigint"


def create_version_trigger_via(table, parent, column):
    """0016's calendar-version trigger for a table whose sub account is its ``parent``'s (the
    row of ``parent`` whose id is the changed row's ``column``)."""
    op.execute(
        f"CREATE TRIGGER calendar_version_{table}_change AFTER INSERT OR UPDATE OR DELETE"
        f" ON {table} FOR EACH ROW EXECUTE FUNCTION calendar_input_changed_via('{parent}',"
        f" '{column}')"
    )


def upgrade():
    op.execute(
        f"""
        CREATE FUNCTION calendar_input_changed_via() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            changed jsonb;
        BEGIN
            IF TG_OP = 'DELETE' THEN changed := to_jsonb(OLD); ELSE changed := to_jsonb(NEW);
            END IF;
            EXECUTE format(
                'INSERT INTO calendar_versions (sub_account_id, version)'
                ' SELECT sub_account_id, {POSTGRES_RANDOM} FROM %I WHERE id = $1'
                ' ON CONFLICT (sub_account_id) DO UPDATE SET version = excluded.version',
                TG_ARGV[0]
            ) USING (changed ->> TG_ARGV[1])::integer;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER calendar_version_hosts_change AFTER INSERT OR UPDATE OR DELETE ON hosts"
        " FOR EACH ROW EXECUTE FUNCTION calendar_input_changed('on_row')"
    )
    op.add_column(
        "event_types",
        sa.Column("assignment", sa.String(16), nullable=False, server_default="single"),
    )
    op.create_check_constraint(
        op.f("ck_event_types_assignment"), "event_types", _in("assignment", ASSIGNMENTS)
    )
    op.add_column("event_types", sa.Column("max_ahead", sa.Integer(), nullable=True))
    op.create_check_constraint(
        op.f("ck_event_types_max_ahead"), "event_types", "max_ahead IS NULL OR max_ahead >= 0"
    )
    op.create_table(
        "event_type_hosts",
        sa.Column("event_type_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False, server_default="2"),
        sa.Column("weight", sa.Integer(), nullable=False, server_default="100"),
        sa.Column(
            "eligible_since",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.CheckConstraint("priority BETWEEN 0 AND 4", name=op.f("ck_event_type_hosts_priority")),
        sa.CheckConstraint("weight BETWEEN 1 AND 1000", name=op.f("ck_event_type_hosts_weight")),
        sa.ForeignKeyConstraint(
            ["event_type_id"],
            ["event_types.id"],
            name=op.f("fk_event_type_hosts_event_type_id_event_types"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_event_type_hosts_host_id_hosts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("event_type_id", "host_id", name=op.f("pk_event_type_hosts")),
    )
    op.create_index(op.f("ix_event_type_hosts_host_id"), "event_type_hosts", ["host_id"])
    create_version_trigger_via("event_type_hosts", "event_types", "event_type_id")
    op.add_column(
        "bookings",
        sa.Column("assignment_reason", sa.String(24), nullable=False, server_default="single"),
    )
    op.create_check_constraint(
        op.f("ck_bookings_assignment_reason"), "bookings", _in("assignment_reason", REASONS)
    )
    op.add_column(
        "slot_holds",
        sa.Column("assignment_reason", sa.String(24), nullable=False, server_default="single"),
    )
    op.create_check_constraint(
        op.f("ck_slot_holds_assignment_reason"), "slot_holds", _in("assignment_reason", REASONS)
    )


def downgrade():
    op.drop_constraint(op.f("ck_slot_holds_assignment_reason"), "slot_holds")
    op.drop_column("slot_holds", "assignment_reason")
    op.drop_constraint(op.f("ck_bookings_assignment_reason"), "bookings")
    op.drop_column("bookings", "assignment_reason")
    op.execute("DROP TRIGGER calendar_version_event_type_hosts_change ON event_type_hosts")
    op.drop_index(op.f("ix_event_type_hosts_host_id"), table_name="event_type_hosts")
    op.drop_table("event_type_hosts")
    op.drop_constraint(op.f("ck_event_types_max_ahead"), "event_types")
    op.drop_column("event_types", "max_ahead")
    op.drop_constraint(op.f("ck_event_types_assignment"), "event_types")
    op.drop_column("event_types", "assignment")
    op.execute("DROP TRIGGER calendar_version_hosts_change ON hosts")
    op.execute("DROP FUNCTION calendar_input_changed_via()")
