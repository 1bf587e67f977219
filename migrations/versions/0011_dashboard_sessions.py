"""Dashboard sessions kept by the server, so sign-out and password changes end them

Revision ID: 0011
Revises: 0010

Sessions signed in before this revision carry no session token and are asked to sign in again.
"""

from alembic import op
import sqlalchemy as sa


revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_digest", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_dashboard_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dashboard_sessions")),
        sa.UniqueConstraint("token_digest", name=op.f("uq_dashboard_sessions_token_digest")),
    )
    op.create_index(
        op.f("ix_dashboard_sessions_user_id"), "dashboard_sessions", ["user_id"], unique=False
    )


def downgrade():
    op.drop_index(op.f("ix_dashboard_sessions_user_id"), table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
