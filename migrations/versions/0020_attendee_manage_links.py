"""Attendees act for themselves: manage links, the sub account's rules for them, who acted

Revision ID: 0020
Revises: 0019

- ``attendees.manage_link_version``: signed into each attendee's manage link; raising it (the
  dashboard's "New link") makes every earlier link of that attendee stop working.
- ``bookings.attendee_moves``: how many times the attendees moved the booking themselves.
- ``calendar_settings.attendee_change_notice_hours`` (default 0) and
  ``attendee_max_reschedules`` (NULL: no limit): how late, and how often, an attendee may act.
- ``outbox_events.actor``: who made the change, ``attendee`` or ``business``; NULL for events
  written before (they were all the business's).

Plain ``ADD COLUMN``s with constant server defaults, which PostgreSQL adds without rewriting
rows.
"""

from alembic import op
import sqlalchemy as sa

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column(
        "attendees",
        sa.Column("manage_link_version", sa.Integer(), nullable=False, server_default="0"),
    )
    op.add_column(
        "bookings", sa.Column("attendee_moves", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column(
        "calendar_settings",
        sa.Column("attendee_change_notice_hours", sa.Integer(), nullable=False, server_default="0"),
    )
    op.add_column(
        "calendar_settings", sa.Column("attendee_max_reschedules", sa.Integer(), nullable=True)
    )
    op.add_column("outbox_events", sa.Column("actor", sa.String(16), nullable=True))


def downgrade():
    op.drop_column("outbox_events", "actor")
    op.drop_column("calendar_settings", "attendee_max_reschedules")
    op.drop_column("calendar_settings", "attendee_change_notice_hours")
    op.drop_column("attendees", "manage_link_version")
    op.drop_column("bookings", "attendee_moves")
