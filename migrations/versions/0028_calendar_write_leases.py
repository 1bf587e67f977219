"""One writer at a time of a booking's event in a connected calendar

Revision ID: 0028
Revises: 0027

``calendar_write_leases``: a writer (the outbox's write-back, a second delivery of it, the
writing of existing bookings after a connection is made) claims a booking's event in a
connection's calendar before it writes, and gives it back in the transaction that records the
outcome. Empty at the start: nothing is being written during a migration.
"""

from alembic import op
import sqlalchemy as sa

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "calendar_write_leases",
        sa.Column("booking_id", sa.Integer(), nullable=False),
        sa.Column("calendar_connection_id", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=32), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["booking_id"],
            ["bookings.id"],
            name=op.f("fk_calendar_write_leases_booking_id_bookings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["calendar_connection_id"],
            ["calendar_connections.id"],
            name=op.f("fk_calendar_write_leases_calendar_connection_id_calendar_connections"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "booking_id", "calendar_connection_id", name=op.f("pk_calendar_write_leases")
        ),
    )


def downgrade():
    op.drop_table("calendar_write_leases")
