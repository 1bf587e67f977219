"""Booking caps: at most so many bookings or minutes a day, week and month

Revision ID: 0022
Revises: 0021

``event_types.booking_limits`` and ``calendar_settings.booking_limits`` (JSON, NULL: no cap),
shaped ``{"perDay": {"count": K, "minutes": M}, "perWeek": {...}, "perMonth": {...}}``.

A cap decides which slots are open, so a change of the calendar's moves its availability: the
``calendar_settings`` trigger of 0016 that gives the calendar a new version on an update of
the columns availability reads is made again with ``booking_limits`` among them (the
``event_types`` one fires on any update already).
"""

from alembic import op
import sqlalchemy as sa

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

SETTINGS_COLUMNS = [
    "timezone",
    "default_duration",
    "minimum_notice_minutes",
    "booking_horizon_days",
]


def _settings_trigger(columns):
    op.execute("DROP TRIGGER calendar_version_calendar_settings_change ON calendar_settings")
    op.execute(
        "CREATE TRIGGER calendar_version_calendar_settings_change"
        f" AFTER INSERT OR UPDATE OF {', '.join(columns)} OR DELETE ON calendar_settings"
        " FOR EACH ROW EXECUTE FUNCTION calendar_input_changed('on_row')"
    )


def upgrade():
    op.add_column("event_types", sa.Column("booking_limits", sa.JSON(), nullable=True))
    op.add_column("calendar_settings", sa.Column("booking_limits", sa.JSON(), nullable=True))
    _settings_trigger([*SETTINGS_COLUMNS, "booking_limits"])


def downgrade():
    _settings_trigger(SETTINGS_COLUMNS)
    op.drop_column("calendar_settings", "booking_limits")
    op.drop_column("event_types", "booking_limits")
