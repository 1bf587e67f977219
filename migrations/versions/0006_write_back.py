"""Write-back: a booking's iCalendar revision, delivery attempts, and write-back health

Revision ID: 0006
Revises: 0005

``bookings.sequence`` is the iCalendar SEQUENCE of the booking's event, raised by every change
a calendar shows (time, title, description, attendees, status). ``outbox_deliveries`` becomes
a handler's record of an event: ``status`` (``delivered``, ``retrying``, ``failed``),
``attempts``, ``last_error`` and ``next_attempt_at``; ``delivered_at`` is set on success only
(rows from before were all successes). ``calendar_connections`` gains the outcome of its latest
write-back: ``last_write_at``, ``last_write_error``, ``last_write_error_at``.
"""

from alembic import op
import sqlalchemy as sa

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("bookings") as batch_op:
        batch_op.add_column(sa.Column("sequence", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("outbox_deliveries") as batch_op:
        batch_op.add_column(
            sa.Column("status", sa.String(length=16), nullable=False, server_default="delivered")
        )
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.alter_column(
            "delivered_at", existing_type=sa.DateTime(timezone=True), nullable=True
        )
        batch_op.create_index("ix_outbox_deliveries_retrying", ["status", "next_attempt_at"])
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.add_column(sa.Column("last_write_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_write_error", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("last_write_error_at", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade():
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.drop_column("last_write_error_at")
        batch_op.drop_column("last_write_error")
        batch_op.drop_column("last_write_at")
    op.execute("DELETE FROM outbox_deliveries WHERE status <> 'delivered'")
    with op.batch_alter_table("outbox_deliveries") as batch_op:
        batch_op.drop_index("ix_outbox_deliveries_retrying")
        batch_op.alter_column(
            "delivered_at", existing_type=sa.DateTime(timezone=True), nullable=False
        )
        batch_op.drop_column("next_attempt_at")
        batch_op.drop_column("last_error")
        batch_op.drop_column("attempts")
        batch_op.drop_column("status")
    with op.batch_alter_table("bookings") as batch_op:
        batch_op.drop_column("sequence")
