"""Fresh calendars: syncs asked for and coalesced, push channels

Revision ID: 0017
Revises: 0016

``calendar_connections`` gains:

- ``sync_requested_at``: a sync of the connection is queued (set by whoever asks for one, a new
  connection, a notification, a poll; cleared when the sync begins). While it is set, asking
  again queues nothing more, so a burst of notifications becomes one sync; a worker that starts
  later finds the connections still waiting by it;
- ``sync_running_until``: a sync is running (a lease, so a crashed worker's is taken over once
  it has passed); a second sync of the same connection waits for it;
- ``last_notification_at``: the latest push notification received for one of its calendars;
- ``test_requested_at``, ``test_finished_at``, ``test_result``: a person's "Test connection",
  run by the worker (no calendar server is called in a person's request), and what it found.

``push_channels``: one per connected calendar that the provider tells of its changes (a Google
``events.watch`` channel, a Microsoft Graph subscription): the provider's ids, the digest of
the secret it sends back with each notification, and when it expires. A channel whose calendar
is no longer read keeps its row (``connected_calendar_id`` NULL) until the worker has stopped it
at the provider.
"""

from alembic import op
import sqlalchemy as sa

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.add_column(
            sa.Column("sync_requested_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("sync_running_until", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("last_notification_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("test_requested_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("test_finished_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("test_result", sa.Text(), nullable=True))
    op.create_table(
        "push_channels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column(
            "calendar_connection_id",
            sa.Integer(),
            sa.ForeignKey(
                "calendar_connections.id",
                name="fk_push_channels_calendar_connection_id_calendar_connections",
                ondelete="CASCADE",
            ),
            nullable=False,
        ),
        sa.Column(
            "connected_calendar_id",
            sa.Integer(),
            sa.ForeignKey(
                "connected_calendars.id",
                name="fk_push_channels_connected_calendar_id_connected_calendars",
                ondelete="SET NULL",
            ),
            nullable=True,
        ),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("resource_id", sa.String(1000), nullable=True),
        sa.Column("secret_digest", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_notification_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_push_channels"),
        sa.UniqueConstraint("kind", "channel_id", name="uq_push_channels_kind_channel_id"),
        sa.UniqueConstraint("connected_calendar_id", name="uq_push_channels_connected_calendar_id"),
    )
    op.create_index("ix_push_channels_expires_at", "push_channels", ["expires_at"])
    op.create_index(
        "ix_push_channels_calendar_connection_id", "push_channels", ["calendar_connection_id"]
    )
    op.create_index(
        "ix_calendar_connections_sync_requested_at",
        "calendar_connections",
        ["sync_requested_at"],
    )


def downgrade():
    op.drop_index("ix_calendar_connections_sync_requested_at", "calendar_connections")
    op.drop_index("ix_push_channels_calendar_connection_id", "push_channels")
    op.drop_index("ix_push_channels_expires_at", "push_channels")
    op.drop_table("push_channels")
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.drop_column("test_result")
        batch_op.drop_column("test_finished_at")
        batch_op.drop_column("test_requested_at")
        batch_op.drop_column("last_notification_at")
        batch_op.drop_column("sync_running_until")
        batch_op.drop_column("sync_requested_at")
