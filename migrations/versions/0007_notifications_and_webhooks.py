"""Notifications and webhooks: the mail sent (or kept), subscriptions, deliveries, attempts

Revision ID: 0007
Revises: 0006

``outbox_events.snapshot``: the booking as the event left it, so a late message tells of that
state. ``mail_messages``: one row per message and recipient, unique by what it is about
(``dedupe_key``), so a repeated delivery never sends it again. ``webhook_subscriptions``
(secret encrypted), ``webhook_deliveries`` (one per event and subscription, with its retry
state) and ``webhook_attempts`` (each POST's outcome).
"""

from alembic import op
import sqlalchemy as sa


revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("outbox_events") as batch_op:
        batch_op.add_column(sa.Column("snapshot", sa.JSON(), nullable=True))
    op.create_table(
        "webhook_subscriptions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sub_account_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("encrypted_secret", sa.Text(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_reason", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["sub_account_id"],
            ["sub_accounts.id"],
            name=op.f("fk_webhook_subscriptions_sub_account_id_sub_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_subscriptions")),
        sa.UniqueConstraint(
            "sub_account_id", "name", name=op.f("uq_webhook_subscriptions_sub_account_id_name")
        ),
    )
    with op.batch_alter_table("webhook_subscriptions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_webhook_subscriptions_sub_account_id"), ["sub_account_id"], unique=False
        )

    op.create_table(
        "mail_messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dedupe_key", sa.String(length=400), nullable=False),
        sa.Column("sub_account_id", sa.Integer(), nullable=False),
        sa.Column("booking_id", sa.Integer(), nullable=True),
        sa.Column("event_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("recipient", sa.String(length=254), nullable=False),
        sa.Column("subject", sa.String(length=500), nullable=False),
        sa.Column("message_id", sa.String(length=300), nullable=False),
        sa.Column("text_body", sa.Text(), nullable=False),
        sa.Column("html_body", sa.Text(), nullable=False),
        sa.Column("ics", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["booking_id"],
            ["bookings.id"],
            name=op.f("fk_mail_messages_booking_id_bookings"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["outbox_events.id"],
            name=op.f("fk_mail_messages_event_id_outbox_events"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["sub_account_id"],
            ["sub_accounts.id"],
            name=op.f("fk_mail_messages_sub_account_id_sub_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mail_messages")),
    )
    with op.batch_alter_table("mail_messages", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_mail_messages_booking_id"), ["booking_id"], unique=False
        )
        batch_op.create_index(
            "ix_mail_messages_sub_account_created", ["sub_account_id", "created_at"], unique=False
        )
        batch_op.create_index("uq_mail_messages_dedupe_key", ["dedupe_key"], unique=True)

    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["outbox_events.id"],
            name=op.f("fk_webhook_deliveries_event_id_outbox_events"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["webhook_subscriptions.id"],
            name=op.f("fk_webhook_deliveries_subscription_id_webhook_subscriptions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint(
            "subscription_id",
            "event_id",
            name=op.f("uq_webhook_deliveries_subscription_id_event_id"),
        ),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_webhook_deliveries_due", ["status", "next_attempt_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_webhook_deliveries_event_id"), ["event_id"], unique=False
        )

    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.Integer(), nullable=False),
        sa.Column("attempted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("response_excerpt", sa.Text(), nullable=True),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["webhook_deliveries.id"],
            name=op.f("fk_webhook_attempts_delivery_id_webhook_deliveries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_attempts")),
    )
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_webhook_attempts_delivery_id"), ["delivery_id"], unique=False
        )


def downgrade():
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_attempts_delivery_id"))

    op.drop_table("webhook_attempts")
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_deliveries_event_id"))
        batch_op.drop_index("ix_webhook_deliveries_due")

    op.drop_table("webhook_deliveries")
    with op.batch_alter_table("mail_messages", schema=None) as batch_op:
        batch_op.drop_index("uq_mail_messages_dedupe_key")
        batch_op.drop_index("ix_mail_messages_sub_account_created")
        batch_op.drop_index(batch_op.f("ix_mail_messages_booking_id"))

    op.drop_table("mail_messages")
    with op.batch_alter_table("webhook_subscriptions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_subscriptions_sub_account_id"))

    op.drop_table("webhook_subscriptions")
    with op.batch_alter_table("outbox_events") as batch_op:
        batch_op.drop_column("snapshot")
