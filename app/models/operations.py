"""What the running processes say about themselves, for health checks."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model
from app.models.types import UTCDateTime


class WorkerHeartbeat(Model):
    """A Celery worker's last sign of life, one row per worker (its node name). Workers may run
    on other machines; the database is what every web process can see."""

    __tablename__ = "worker_heartbeats"

    worker: Mapped[str] = mapped_column(String(255), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # When it last took a task from the broker, or was seen running one (NULL: not since it
    # started). A worker can beat while it takes nothing (its consumer stuck after a broker
    # outage, issue 48): health compares this with the work waiting.
    worked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
