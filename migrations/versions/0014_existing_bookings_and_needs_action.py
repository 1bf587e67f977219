"""Bookings made before write-back began reach the calendar; failures a person must fix

Revision ID: 0014
Revises: 0013

``calendar_connections`` gains:

- ``write_existing_pending`` and ``write_existing_after``: the worker is to write the sub
  account's future active bookings into the connection (made before it was connected, or before
  write-back was switched on), and the booking id it has written up to so far. Connections that
  already write back are marked too, so the bookings made before they were connected reach
  them after the upgrade (writes are idempotent: a booking already there is written over with
  the same event);
- ``needs_action``: what a person must do for the connection to work again ("reconnect"), set
  by a failure trying again cannot fix and cleared by a success; ``action_mailed_at``: when its
  people were told by mail (once, until it has worked again).
"""

from alembic import op
import sqlalchemy as sa

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.add_column(
            sa.Column(
                "write_existing_pending",
                sa.Boolean(),
                nullable=False,
                server_default=sa.false(),
            )
        )
        batch_op.add_column(sa.Column("write_existing_after", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("needs_action", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("action_mailed_at", sa.DateTime(timezone=True), nullable=True)
        )
    op.execute(
        sa.text(
            "UPDATE calendar_connections SET write_existing_pending = :yes"
            " WHERE write_back = :yes AND active = :yes AND kind <> 'ics'"
        ).bindparams(yes=True)
    )


def downgrade():
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.drop_column("action_mailed_at")
        batch_op.drop_column("needs_action")
        batch_op.drop_column("write_existing_after")
        batch_op.drop_column("write_existing_pending")
