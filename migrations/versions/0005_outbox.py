"""The transactional outbox: domain events as rows, and each handler's receipt

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op


revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "outbox_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("sub_account_id", sa.Integer(), nullable=False),
        sa.Column("booking_id", sa.Integer(), nullable=False),
        sa.Column("changed", sa.JSON(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["booking_id"],
            ["bookings.id"],
            name=op.f("fk_outbox_events_booking_id_bookings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["sub_account_id"],
            ["sub_accounts.id"],
            name=op.f("fk_outbox_events_sub_account_id_sub_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_events")),
    )
    with op.batch_alter_table("outbox_events") as batch_op:
        batch_op.create_index("ix_outbox_events_undelivered", ["delivered_at", "id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_outbox_events_sub_account_id"), ["sub_account_id"], unique=False
        )
    op.create_table(
        "outbox_deliveries",
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("handler", sa.String(length=64), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["outbox_events.id"],
            name=op.f("fk_outbox_deliveries_event_id_outbox_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("event_id", "handler", name=op.f("pk_outbox_deliveries")),
    )


def downgrade():
    op.drop_table("outbox_deliveries")
    with op.batch_alter_table("outbox_events") as batch_op:
        batch_op.drop_index(batch_op.f("ix_outbox_events_sub_account_id"))
        batch_op.drop_index("ix_outbox_events_undelivered")
    op.drop_table("outbox_events")
