"""Periodic booking upkeep."""

from __future__ import annotations

from celery import shared_task

from app.models.types import utcnow
from app.services.bookings.lifecycle import complete_finished_bookings


@shared_task(name="bookings.complete_finished")
def complete_finished() -> int:
    """Mark finished confirmed bookings completed where the calendar asks for it. Idempotent:
    a second run finds nothing left to complete."""
    return len(complete_finished_bookings(now=utcnow()))
