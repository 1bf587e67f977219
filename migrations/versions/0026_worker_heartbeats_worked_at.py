"""Worker heartbeats say when each worker last took a task, not only that it is alive

Revision ID: 0026
Revises: 0025

``worker_heartbeats.worked_at``: when the worker last took a task from the broker or was seen
running one (NULL until it has, since it started). A worker whose consumer is stuck still
beats; ``/statusz`` says "degraded" when the workers it sees took nothing while work waited.
"""

from alembic import op
import sqlalchemy as sa

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column(
        "worker_heartbeats", sa.Column("worked_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade():
    with op.batch_alter_table("worker_heartbeats") as batch:
        batch.drop_column("worked_at")
