"""Event types ask questions; bookings keep the answers

Revision ID: 0035
Revises: 0034

- ``event_types.questions`` (JSON list, default ``[]``): what a booking of the type must or may
  answer, each ``{"key", "label", "type", "required", "options"}``
  (``app.services.availability.questions``).
- ``bookings.responses`` (JSON object, default ``{}``): the answers the create sent, by question
  key, as they were when the booking was made.

Every event type so far asks nothing and every booking so far answered nothing.
"""

from alembic import op
import sqlalchemy as sa

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column(
        "event_types",
        sa.Column("questions", sa.JSON(), nullable=False, server_default=sa.text("'[]'")),
    )
    op.add_column(
        "bookings",
        sa.Column("responses", sa.JSON(), nullable=False, server_default=sa.text("'{}'")),
    )


def downgrade():
    op.drop_column("bookings", "responses")
    op.drop_column("event_types", "questions")
