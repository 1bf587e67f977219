"""Deleting delivered outbox events and mail messages older than ``RETENTION_DAYS``."""

from __future__ import annotations

from celery import shared_task

from app.jobs.retention import purge_old_records
from app.models.types import utcnow


@shared_task(name="retention.purge")
def purge() -> dict[str, int]:
    """One bounded run of the retention (``purge_old_records``); idempotent: a second run
    finds less, or nothing, left. Returns what it deleted."""
    purged = purge_old_records(utcnow())
    return {"outbox_events": purged.outbox_events, "mail_messages": purged.mail_messages}
