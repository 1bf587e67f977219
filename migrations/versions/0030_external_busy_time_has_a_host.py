"""A connected calendar's busy time is its host's

Revision ID: 0030
Revises: 0029

Busy time read from a connected calendar (``blocked_times`` with ``source = 'external'``) now
carries the host whose calendar it is (the sync writes ``host_id``), so a host's events block
that host alone; blocked time entered by hand stays everyone's unless it names a host. The
rows stored before are given their connection's host.
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        """
        UPDATE blocked_times AS b SET host_id = c.host_id
        FROM calendar_connections AS c
        WHERE b.calendar_connection_id = c.id AND b.host_id IS NULL
        """
    )


def downgrade():
    op.execute("UPDATE blocked_times SET host_id = NULL WHERE calendar_connection_id IS NOT NULL")
