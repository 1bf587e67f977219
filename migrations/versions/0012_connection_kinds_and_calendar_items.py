"""Connection kinds, the calendars of a connection, and busy time kept per calendar item

Revision ID: 0012
Revises: 0011

``calendar_connections.provider`` becomes ``kind`` (``caldav``, ``google``, ``microsoft``,
``ics``) and gains ``write_calendar`` (the calendar Google and Microsoft bookings are written
into) and ``skipped_count``/``skipped_reason`` (events a sync could not read). Its sync state
moves to ``connected_calendars``, one row per calendar read (a connection of Google or
Microsoft may read several); a CalDAV connection's known calendar URL becomes its row, with the
sync state left empty so the next sync reads it in full. What was read is kept per item in
``calendar_items`` (a CalDAV resource, a provider's event, a feed's event), and each external
``blocked_times`` row points at its item: one changed event touches only its own rows. Busy
time stored before this revision has no item; the next full read of its connection replaces it.
"""

from alembic import op
import sqlalchemy as sa

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_SYNC_STATE = ("calendar_url", "sync_token", "ctag", "synced_until", "synced_timezone")


def upgrade():
    op.create_table(
        "connected_calendars",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("calendar_connection_id", sa.Integer(), nullable=False),
        sa.Column("remote_id", sa.String(length=1000), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("sync_token", sa.Text(), nullable=True),
        sa.Column("ctag", sa.Text(), nullable=True),
        sa.Column("synced_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("synced_timezone", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["calendar_connection_id"],
            ["calendar_connections.id"],
            name=op.f("fk_connected_calendars_calendar_connection_id_calendar_connections"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_connected_calendars")),
        sa.UniqueConstraint(
            "calendar_connection_id",
            "remote_id",
            name=op.f("uq_connected_calendars_calendar_connection_id_remote_id"),
        ),
    )
    op.create_index(
        op.f("ix_connected_calendars_calendar_connection_id"),
        "connected_calendars",
        ["calendar_connection_id"],
        unique=False,
    )
    op.create_table(
        "calendar_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("connected_calendar_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=1000), nullable=False),
        sa.Column("etag", sa.String(length=255), nullable=True),
        sa.Column("uid", sa.String(length=500), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["connected_calendar_id"],
            ["connected_calendars.id"],
            name=op.f("fk_calendar_items_connected_calendar_id_connected_calendars"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calendar_items")),
        sa.UniqueConstraint(
            "connected_calendar_id", "key", name=op.f("uq_calendar_items_connected_calendar_id_key")
        ),
    )
    op.create_index(
        op.f("ix_calendar_items_connected_calendar_id"),
        "calendar_items",
        ["connected_calendar_id"],
        unique=False,
    )
    op.execute(
        "INSERT INTO connected_calendars (calendar_connection_id, remote_id)"
        " SELECT id, calendar_url FROM calendar_connections WHERE calendar_url IS NOT NULL"
    )
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.alter_column("provider", new_column_name="kind")
        batch_op.add_column(sa.Column("write_calendar", sa.String(length=1000), nullable=True))
        batch_op.add_column(
            sa.Column("skipped_count", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("skipped_reason", sa.Text(), nullable=True))
        for column in _SYNC_STATE:
            batch_op.drop_column(column)
    with op.batch_alter_table("blocked_times") as batch_op:
        batch_op.add_column(sa.Column("calendar_item_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_blocked_times_calendar_item_id_calendar_items"),
            "calendar_items",
            ["calendar_item_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_index(
            batch_op.f("ix_blocked_times_calendar_item_id"), ["calendar_item_id"], unique=False
        )


def downgrade():
    with op.batch_alter_table("blocked_times") as batch_op:
        batch_op.drop_index(batch_op.f("ix_blocked_times_calendar_item_id"))
        batch_op.drop_constraint(
            batch_op.f("fk_blocked_times_calendar_item_id_calendar_items"), type_="foreignkey"
        )
        batch_op.drop_column("calendar_item_id")
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.alter_column("kind", new_column_name="provider")
        batch_op.drop_column("skipped_reason")
        batch_op.drop_column("skipped_count")
        batch_op.drop_column("write_calendar")
        batch_op.add_column(sa.Column("calendar_url", sa.String(length=1000), nullable=True))
        batch_op.add_column(sa.Column("sync_token", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("ctag", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("synced_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("synced_timezone", sa.String(length=64), nullable=True))
    op.execute(
        "UPDATE calendar_connections SET calendar_url = (SELECT MIN(remote_id)"
        " FROM connected_calendars WHERE calendar_connection_id = calendar_connections.id)"
    )
    op.drop_index(op.f("ix_calendar_items_connected_calendar_id"), table_name="calendar_items")
    op.drop_table("calendar_items")
    op.drop_index(
        op.f("ix_connected_calendars_calendar_connection_id"), table_name="connected_calendars"
    )
    op.drop_table("connected_calendars")
