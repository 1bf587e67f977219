"""Reminders before bookings start (booking event emails are an outbox handler)."""

from __future__ import annotations

from celery import shared_task

from app.jobs.reminders import send_due_reminders
from app.models.types import utcnow


@shared_task(name="notifications.send_reminders")
def send_reminders() -> int:
    """Send the reminders that are due; returns how many."""
    return send_due_reminders(utcnow())
