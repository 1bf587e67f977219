"""Calendar connections as operators provision them, and the state of their CalDAV sync

Revision ID: 0004
Revises: 0003

``calendar_connections`` gains a ``name`` (unique per sub account; rows from before get
``connection-<id>``), the ``calendar`` to read (URL or display name), ``write_back``, the sync
state that lets a sync skip an unchanged calendar (``calendar_url``, ``ctag``,
``synced_until``, ``synced_timezone``; ``sync_token`` exists) and its outcome
(``last_attempt_at``, ``last_error_at``, ``consecutive_failures``, ``busy_count``).
``last_synced_at`` becomes ``last_success_at`` and ``last_sync_error`` becomes ``last_error``;
``last_sync_status`` goes (``consecutive_failures`` says whether the connection is failing).
"""

from alembic import op
import sqlalchemy as sa

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.add_column(sa.Column("name", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("calendar", sa.String(length=1000), nullable=True))
        batch_op.add_column(
            sa.Column("write_back", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch_op.add_column(sa.Column("calendar_url", sa.String(length=1000), nullable=True))
        batch_op.add_column(sa.Column("ctag", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("synced_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("synced_timezone", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("consecutive_failures", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("busy_count", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.alter_column("last_synced_at", new_column_name="last_success_at")
        batch_op.alter_column("last_sync_error", new_column_name="last_error")
        batch_op.drop_column("last_sync_status")

    op.execute("UPDATE calendar_connections SET name = 'connection-' || id WHERE name IS NULL")

    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.alter_column("name", existing_type=sa.String(length=255), nullable=False)
        batch_op.create_unique_constraint(
            "uq_calendar_connections_sub_account_id_name", ["sub_account_id", "name"]
        )


def downgrade():
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.drop_constraint("uq_calendar_connections_sub_account_id_name", type_="unique")
        batch_op.add_column(sa.Column("last_sync_status", sa.String(length=16), nullable=True))
        batch_op.alter_column("last_error", new_column_name="last_sync_error")
        batch_op.alter_column("last_success_at", new_column_name="last_synced_at")
        for column in (
            "busy_count",
            "consecutive_failures",
            "last_error_at",
            "last_attempt_at",
            "synced_timezone",
            "synced_until",
            "ctag",
            "calendar_url",
            "write_back",
            "calendar",
            "name",
        ):
            batch_op.drop_column(column)
