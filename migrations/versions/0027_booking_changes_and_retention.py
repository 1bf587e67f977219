"""A booking's history in a table of its own, and the indexes the retention job deletes by

Revision ID: 0027
Revises: 0026

``booking_changes``: one row per change of a booking (what, by whom, which fields, when),
written beside its outbox event and kept as long as the booking. The dashboard's history read
the outbox, which is a queue: with its own table, delivered outbox rows older than
``RETENTION_DAYS`` can go. Filled here from the outbox rows there are, in their order.

Indexes: a booking's outbox events in order (the handlers' ordering check, a booking's
deletion); mail messages by age (what the retention deletes) and by event (the ``SET NULL``
of an event's deletion, which scanned the whole table for each event before).
"""

from alembic import op
import sqlalchemy as sa

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "booking_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("booking_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("actor", sa.String(length=16), nullable=False),
        sa.Column("changed", sa.JSON(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["booking_id"],
            ["bookings.id"],
            name=op.f("fk_booking_changes_booking_id_bookings"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_booking_changes")),
    )
    op.create_index("ix_booking_changes_booking_id", "booking_changes", ["booking_id", "id"])
    op.execute(
        "INSERT INTO booking_changes (booking_id, kind, actor, changed, occurred_at)"
        " SELECT booking_id, kind, coalesce(actor, 'business'), changed, occurred_at"
        " FROM outbox_events ORDER BY id"
    )
    op.create_index("ix_outbox_events_booking_id", "outbox_events", ["booking_id", "id"])
    op.create_index("ix_mail_messages_created_at", "mail_messages", ["created_at"])
    op.create_index("ix_mail_messages_event_id", "mail_messages", ["event_id"])


def downgrade():
    op.drop_index("ix_mail_messages_event_id", table_name="mail_messages")
    op.drop_index("ix_mail_messages_created_at", table_name="mail_messages")
    op.drop_index("ix_outbox_events_booking_id", table_name="outbox_events")
    op.drop_index("ix_booking_changes_booking_id", table_name="booking_changes")
    op.drop_table("booking_changes")
