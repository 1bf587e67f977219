"""Busy-time lookups that read only the intervals near a window, however long the history

Revision ID: 0003
Revises: 0002

``load_busy`` asks for the bookings and blocked times overlapping a window
(``start < :end AND end > :start``). A B-tree led by ``start`` bounds only ``start < :end``,
so every interval before the window (the whole past) was read.

A GiST index answers the range overlap ``tstzrange(start_at, end_at, '[)') &&
tstzrange(:start, :end, '[)')`` for blocked times (bookings have one already: the index behind
``ex_bookings_no_overlap``, 0002).

The B-trees on the intervals are led by their end instead, so where a B-tree serves the lookup
it bounds ``end > :start`` and reads only the intervals that end after the window starts: the
future, which the booking horizon keeps short, not the past.
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("bookings") as batch_op:
        batch_op.drop_index("ix_bookings_sub_account_occupied")
        batch_op.create_index(
            "ix_bookings_sub_account_occupied",
            ["sub_account_id", "occupied_end", "occupied_start"],
            unique=False,
        )
    with op.batch_alter_table("blocked_times") as batch_op:
        batch_op.drop_index("ix_blocked_times_sub_account_span")
        batch_op.create_index(
            "ix_blocked_times_sub_account_span",
            ["sub_account_id", "end_at", "start_at"],
            unique=False,
        )
    # btree_gist (created by 0002) provides the GiST operator class for sub_account_id.
    op.execute(
        """
        CREATE INDEX ix_blocked_times_sub_account_range ON blocked_times
        USING gist (sub_account_id, tstzrange(start_at, end_at, '[)'))
        """
    )


def downgrade():
    op.execute("DROP INDEX ix_blocked_times_sub_account_range")
    with op.batch_alter_table("blocked_times") as batch_op:
        batch_op.drop_index("ix_blocked_times_sub_account_span")
        batch_op.create_index(
            "ix_blocked_times_sub_account_span",
            ["sub_account_id", "start_at", "end_at"],
            unique=False,
        )
    with op.batch_alter_table("bookings") as batch_op:
        batch_op.drop_index("ix_bookings_sub_account_occupied")
        batch_op.create_index(
            "ix_bookings_sub_account_occupied",
            ["sub_account_id", "occupied_start", "occupied_end"],
            unique=False,
        )
