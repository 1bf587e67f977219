"""Every event type is one host's

Revision ID: 0031
Revises: 0030

``event_types.host_id``: the host an event type's bookings are made with (until round robin
and collective types choose among several). Each existing event type becomes its sub
account's first host's; an event type written without a host takes that host too (the
``hosts_default`` trigger of 0029).
"""

from alembic import op
import sqlalchemy as sa

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("event_types", sa.Column("host_id", sa.Integer(), nullable=True))
    op.execute(
        """
        UPDATE event_types AS e SET host_id = (
            SELECT h.id FROM hosts AS h WHERE h.sub_account_id = e.sub_account_id
            ORDER BY h.id LIMIT 1
        )
        """
    )
    op.alter_column("event_types", "host_id", nullable=False)
    op.create_foreign_key(
        op.f("fk_event_types_host_id_hosts"),
        "event_types",
        "hosts",
        ["host_id"],
        ["id"],
        ondelete="RESTRICT",
    )
    op.create_index(op.f("ix_event_types_host_id"), "event_types", ["host_id"])
    op.execute(
        """
        CREATE TRIGGER a_event_types_host_default BEFORE INSERT ON event_types
        FOR EACH ROW EXECUTE FUNCTION hosts_default()
        """
    )


def downgrade():
    op.execute("DROP TRIGGER a_event_types_host_default ON event_types")
    op.drop_index(op.f("ix_event_types_host_id"), table_name="event_types")
    op.drop_constraint(op.f("fk_event_types_host_id_hosts"), "event_types")
    op.drop_column("event_types", "host_id")
