"""Manage links name a random key; an attendee's choice holds one time at a time

Revision ID: 0025
Revises: 0024

- ``attendees.link_key``: 128 random bits (base64url) that a manage link names its attendee
  by, instead of the row's sequential id, so a token tells nothing about other attendees.
  Existing attendees get one each. Links made before keep working (they are signed; the
  service still reads their id), and every link made from now on names the key.
- ``attendees.choice_hold_id``: the hold the attendee's manage link placed while they choose a
  new time. Their next choice replaces it, so one link holds at most one time.
"""

import secrets

from alembic import op
import sqlalchemy as sa

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("attendees", sa.Column("link_key", sa.String(22), nullable=True))
    attendees = sa.table("attendees", sa.column("id", sa.Integer()), sa.column("link_key"))
    connection = op.get_bind()
    ids = connection.execute(sa.select(attendees.c.id)).scalars().all()
    for start in range(0, len(ids), 1000):
        connection.execute(
            attendees.update()
            .where(attendees.c.id == sa.bindparam("attendee_id"))
            .values(link_key=sa.bindparam("key")),
            [
                {"attendee_id": attendee_id, "key": secrets.token_urlsafe(16)}
                for attendee_id in ids[start : start + 1000]
            ],
        )
    with op.batch_alter_table("attendees") as batch_op:
        batch_op.alter_column("link_key", existing_type=sa.String(22), nullable=False)
        batch_op.create_unique_constraint("uq_attendees_link_key", ["link_key"])
        batch_op.add_column(
            sa.Column(
                "choice_hold_id",
                sa.Integer(),
                sa.ForeignKey(
                    "slot_holds.id",
                    name="fk_attendees_choice_hold_id_slot_holds",
                    ondelete="SET NULL",
                ),
                nullable=True,
            )
        )


def downgrade():
    with op.batch_alter_table("attendees") as batch_op:
        batch_op.drop_column("choice_hold_id")
        batch_op.drop_constraint("uq_attendees_link_key", type_="unique")
        batch_op.drop_column("link_key")
