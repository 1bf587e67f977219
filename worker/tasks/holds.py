"""Periodic slot-hold upkeep."""

from __future__ import annotations

from celery import shared_task

from app.models.types import utcnow
from app.services.bookings.holds import purge_expired_holds


@shared_task(name="holds.purge_expired")
def purge_expired() -> int:
    """Delete expired slot holds. Tidiness only (an expired hold counts for nothing either
    way) and idempotent: a second run finds nothing left."""
    return purge_expired_holds(utcnow())
