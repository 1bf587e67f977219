"""A collective booking is made with every host of its event type

Revision ID: 0033
Revises: 0032

``booking_hosts``: the hosts a booking is made with besides its first (``bookings.host_id``):
a collective booking's other hosts, whose time it takes too. Empty for every booking so far.
A change gives the calendar a new version (through its booking, 0032's trigger function).
"""

from alembic import op
import sqlalchemy as sa

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "booking_hosts",
        sa.Column("booking_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["booking_id"],
            ["bookings.id"],
            name=op.f("fk_booking_hosts_booking_id_bookings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["hosts.id"],
            name=op.f("fk_booking_hosts_host_id_hosts"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("booking_id", "host_id", name=op.f("pk_booking_hosts")),
    )
    op.create_index(op.f("ix_booking_hosts_host_id"), "booking_hosts", ["host_id"])
    op.execute(
        "CREATE TRIGGER calendar_version_booking_hosts_change AFTER INSERT OR UPDATE OR DELETE"
        " ON booking_hosts FOR EACH ROW EXECUTE FUNCTION"
        " calendar_input_changed_via('bookings', 'booking_id')"
    )


def downgrade():
    op.execute("DROP TRIGGER calendar_version_booking_hosts_change ON booking_hosts")
    op.drop_index(op.f("ix_booking_hosts_host_id"), table_name="booking_hosts")
    op.drop_table("booking_hosts")
