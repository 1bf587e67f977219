"""Reminder lists: per event type and per sub account, several offsets, three channels

Revision ID: 0021
Revises: 0020

- ``event_types.reminders`` (JSON, NULL: the sub account's list) and
  ``calendar_settings.reminders`` (JSON, default ``[]``): lists of
  ``{"minutesBefore": N, "channels": [...]}``, channels among ``attendeeEmail``,
  ``businessEmail`` and ``webhook``.
- ``calendar_settings.reminder_minutes_before`` moves into the list as the one reminder it was
  (``{"minutesBefore": N, "channels": ["attendeeEmail"]}``) and the column goes; documents still
  take ``reminderMinutesBefore`` as shorthand for that list.
- ``booking_reminders``: each reminder of a booking time, decided once (unique per booking,
  start and offset). The reminder mails the earlier code sent (``mail_messages`` keyed
  ``reminder:<booking>:<start>:<email>``) become rows here, so none of them goes out again.
"""

from datetime import datetime, timezone

from alembic import op
import sqlalchemy as sa

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

ATTENDEE_EMAIL = "attendeeEmail"


def upgrade():
    op.add_column("event_types", sa.Column("reminders", sa.JSON(), nullable=True))
    op.add_column(
        "calendar_settings",
        sa.Column("reminders", sa.JSON(), nullable=False, server_default=sa.text("'[]'")),
    )
    op.create_table(
        "booking_reminders",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column(
            "booking_id",
            sa.Integer(),
            sa.ForeignKey(
                "bookings.id", name="fk_booking_reminders_booking_id_bookings", ondelete="CASCADE"
            ),
            nullable=False,
        ),
        sa.Column("start_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("minutes_before", sa.Integer(), nullable=False),
        sa.Column("channels", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column(
            "event_id",
            sa.Integer(),
            sa.ForeignKey(
                "outbox_events.id",
                name="fk_booking_reminders_event_id_outbox_events",
                ondelete="SET NULL",
            ),
            nullable=True,
        ),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_booking_reminders"),
    )
    op.create_index(
        "uq_booking_reminders_once",
        "booking_reminders",
        ["booking_id", "start_at", "minutes_before"],
        unique=True,
    )
    op.create_index("ix_booking_reminders_event_id", "booking_reminders", ["event_id"])

    connection = op.get_bind()
    settings = sa.table(
        "calendar_settings",
        sa.column("sub_account_id", sa.Integer()),
        sa.column("reminder_minutes_before", sa.Integer()),
        sa.column("reminders", sa.JSON()),
    )
    minutes_of = {}
    for sub_account_id, minutes in connection.execute(
        sa.select(settings.c.sub_account_id, settings.c.reminder_minutes_before).where(
            settings.c.reminder_minutes_before.is_not(None)
        )
    ):
        minutes_of[sub_account_id] = minutes
        connection.execute(
            settings.update()
            .where(settings.c.sub_account_id == sub_account_id)
            .values(reminders=[{"minutesBefore": minutes, "channels": [ATTENDEE_EMAIL]}])
        )
    _record_sent_reminders(connection, minutes_of)
    op.drop_column("calendar_settings", "reminder_minutes_before")


def _record_sent_reminders(connection, minutes_of):
    """The reminders the earlier code sent, as decided rows (one per booking and start)."""
    mails = sa.table(
        "mail_messages",
        sa.column("dedupe_key", sa.String()),
        sa.column("kind", sa.String()),
        sa.column("sub_account_id", sa.Integer()),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    reminders = sa.table(
        "booking_reminders",
        sa.column("booking_id", sa.Integer()),
        sa.column("start_at", sa.DateTime(timezone=True)),
        sa.column("minutes_before", sa.Integer()),
        sa.column("channels", sa.JSON()),
        sa.column("status", sa.String()),
        sa.column("decided_at", sa.DateTime(timezone=True)),
    )
    bookings = sa.table("bookings", sa.column("id", sa.Integer()))
    existing = set(connection.scalars(sa.select(bookings.c.id)))
    seen = set()
    for key, sub_account_id, created_at in connection.execute(
        sa.select(mails.c.dedupe_key, mails.c.sub_account_id, mails.c.created_at).where(
            mails.c.kind == "booking.reminder", mails.c.dedupe_key.like("reminder:%")
        )
    ):
        _, booking_id, rest = key.split(":", 2)
        start_text = rest.rsplit(":", 1)[0]  # reminder:<booking>:<start Z>:<email>
        minutes = minutes_of.get(sub_account_id)
        if minutes is None or (booking_id, start_text) in seen or int(booking_id) not in existing:
            continue  # no reminder any more, or of a booking deleted since
        seen.add((booking_id, start_text))
        start = datetime.strptime(start_text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        connection.execute(
            reminders.insert().values(
                booking_id=int(booking_id),
                start_at=start,
                minutes_before=minutes,
                channels=[ATTENDEE_EMAIL],
                status="sent",
                decided_at=created_at,
            )
        )


def downgrade():
    op.add_column(
        "calendar_settings", sa.Column("reminder_minutes_before", sa.Integer(), nullable=True)
    )
    connection = op.get_bind()
    settings = sa.table(
        "calendar_settings",
        sa.column("sub_account_id", sa.Integer()),
        sa.column("reminder_minutes_before", sa.Integer()),
        sa.column("reminders", sa.JSON()),
    )
    for sub_account_id, listed in connection.execute(
        sa.select(settings.c.sub_account_id, settings.c.reminders)
    ):
        mailed = [r["minutesBefore"] for r in listed or () if ATTENDEE_EMAIL in r["channels"]]
        if mailed:
            connection.execute(
                settings.update()
                .where(settings.c.sub_account_id == sub_account_id)
                .values(reminder_minutes_before=max(mailed))
            )
    op.drop_index("ix_booking_reminders_event_id", table_name="booking_reminders")
    op.drop_index("uq_booking_reminders_once", table_name="booking_reminders")
    op.drop_table("booking_reminders")
    op.drop_column("calendar_settings", "reminders")
    op.drop_column("event_types", "reminders")
