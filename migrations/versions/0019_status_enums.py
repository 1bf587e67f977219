"""Status columns as Enums: their hand-written CHECKs replaced by the Enums' own

Revision ID: 0019
Revises: 0018

The models now declare ``Booking.status`` and ``User.role`` as ``sa.Enum(BookingStatus)`` and
``sa.Enum(Role)`` with ``native_enum=False, create_constraint=True`` (stored as the members'
values, in the same VARCHAR(16) and VARCHAR(20)), whose constraint replaces the
``CheckConstraint`` written out beside them. That constraint has the hand-written one's name
and SQL (``ck_bookings_status``: ``status IN ('pending', ...)``; ``ck_users_role``), so the rows
and what the database accepts stay as they were; this revision swaps one for the other, and its
downgrade swaps them back.

The constraint is added ``NOT VALID`` (no scan while the table is locked) and then validated
outside the migration's transaction, which lets reads and writes of the table go on.
"""

from alembic import op


revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# table: (column, the values its CHECK allows), as the models' Enums store them (their
# ``values_callable``: the members' values, not their names). The columns' types do not change.
ENUM_COLUMNS = {
    "bookings": ("status", ("pending", "confirmed", "cancelled", "completed", "no_show")),
    "users": ("role", ("agency_owner", "agency_user")),
}


def _check(column, values):
    """The CHECK's SQL, as the Enum (and the hand-written constraint before it) has it."""
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def _replace_checks():
    """Each CHECK of ``ENUM_COLUMNS`` dropped and created again (the same name and SQL either
    way: the Enum's in the upgrade, the hand-written one's in the downgrade)."""
    for table, (column, values) in ENUM_COLUMNS.items():
        name = f"ck_{table}_{column}"
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {name},"
            f" ADD CONSTRAINT {name} CHECK ({_check(column, values)}) NOT VALID"
        )
    with op.get_context().autocommit_block():
        for table, (column, _) in ENUM_COLUMNS.items():
            op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT ck_{table}_{column}")


def upgrade():
    _replace_checks()


def downgrade():
    _replace_checks()
