"""No two active bookings of a sub account may occupy overlapping time

Revision ID: 0002
Revises: 0001

The last line of defence behind the per-calendar advisory lock: an exclusion constraint over
the occupied interval (the booking widened by its buffers) of pending and confirmed bookings.
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    op.execute(
        """
        ALTER TABLE bookings ADD CONSTRAINT ex_bookings_no_overlap
        EXCLUDE USING gist (
            sub_account_id WITH =,
            tstzrange(occupied_start, occupied_end, '[)') WITH &&
        ) WHERE (status IN ('pending', 'confirmed'))
        """
    )


def downgrade():
    op.execute("ALTER TABLE bookings DROP CONSTRAINT ex_bookings_no_overlap")
