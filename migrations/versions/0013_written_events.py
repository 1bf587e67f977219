"""Where write-back put a booking's event, for providers that choose the event's id

Revision ID: 0013
Revises: 0012

Microsoft Graph gives an event an id (and an iCalendar UID) of its own choosing; neither can
be set. ``written_events`` keeps, per booking and connection, the id of the event write-back
made, so later changes update that event, a cancellation deletes it, and the sync knows it as
the service's own.
"""

from alembic import op
import sqlalchemy as sa

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "written_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("booking_id", sa.Integer(), nullable=False),
        sa.Column("calendar_connection_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(length=1000), nullable=False),
        sa.ForeignKeyConstraint(["booking_id"], ["bookings.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["calendar_connection_id"], ["calendar_connections.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("booking_id", "calendar_connection_id"),
    )
    op.create_index(
        "ix_written_events_connection_event",
        "written_events",
        ["calendar_connection_id", "event_id"],
    )


def downgrade():
    op.drop_index("ix_written_events_connection_event", table_name="written_events")
    op.drop_table("written_events")
