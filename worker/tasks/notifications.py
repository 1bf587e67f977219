"""Reminders before bookings start (booking event emails are an outbox handler)."""

from __future__ import annotations

from celery import shared_task

from app.models.types import utcnow
from app.services.bookings.reminders import send_due_reminders


@shared_task(name="notifications.send_reminders")
def send_reminders() -> int:
    """Send the reminders that are due; returns how many."""
    return send_due_reminders(utcnow())
