"""Password resets: one-time links for users who forgot their password

Revision ID: 0015
Revises: 0014

``password_resets`` holds the SHA-256 digest of each link's token, when it stops working (an
hour after it was asked for) and when it was used. The mail carrying the link is kept in
``mail_messages`` like all mail, but it is no sub account's: ``sub_account_id`` may now be
empty. Downgrading drops those messages with the table.
"""

from alembic import op
import sqlalchemy as sa


revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "password_resets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_digest", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_password_resets_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_password_resets")),
        sa.UniqueConstraint("token_digest", name=op.f("uq_password_resets_token_digest")),
    )
    op.create_index(
        op.f("ix_password_resets_user_id"), "password_resets", ["user_id"], unique=False
    )
    with op.batch_alter_table("mail_messages") as batch_op:
        batch_op.alter_column("sub_account_id", existing_type=sa.Integer(), nullable=True)


def downgrade():
    op.execute(sa.text("DELETE FROM mail_messages WHERE sub_account_id IS NULL"))
    with op.batch_alter_table("mail_messages") as batch_op:
        batch_op.alter_column("sub_account_id", existing_type=sa.Integer(), nullable=False)
    op.drop_index(op.f("ix_password_resets_user_id"), table_name="password_resets")
    op.drop_table("password_resets")
