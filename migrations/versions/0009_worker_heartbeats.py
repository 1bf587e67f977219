"""Worker heartbeats: each Celery worker's last sign of life, for /readyz

Revision ID: 0009
Revises: 0008
"""

from alembic import op
import sqlalchemy as sa


revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "worker_heartbeats",
        sa.Column("worker", sa.String(length=255), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("worker", name=op.f("pk_worker_heartbeats")),
    )


def downgrade():
    op.drop_table("worker_heartbeats")
