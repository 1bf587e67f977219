"""The worker's heartbeat: a Celery bootstep that records, every ``HEARTBEAT_INTERVAL``, that
this worker is alive (``/readyz`` reports workers not seen for a minute) and when it last took
a task or was running one. It runs on the worker's own timer in the main process, so a worker
whose pool is busy with long tasks still beats, and one that is gone stops.

Beating is not consuming: after a broker outage a worker's consumer could stop taking tasks
while its timer went on (issue 48). So the heartbeat also carries the last time the consumer
took a task (Celery's ``task_received``, sent in this main process) or the pool was running
one; ``/statusz`` says "degraded" when work waits and the workers took nothing
(``app.services.health.check_workers``)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from celery import bootsteps
from celery.signals import task_received
from celery.worker import state
from flask import Flask
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.models.types import utcnow
from app.services.health import HEARTBEAT_INTERVAL, record_worker_heartbeat

log = logging.getLogger(__name__)


def heartbeat_step(flask_app: Flask) -> type[bootsteps.StartStopStep]:
    """The bootstep class for ``flask_app``'s worker."""

    class Heartbeat(bootsteps.StartStopStep):
        requires = ("celery.worker.components:Timer",)

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            super().__init__(worker, **kwargs)
            self.timer_entry: Any = None
            self.took_task_at: datetime | None = None

        def took_task(self, **_: Any) -> None:
            self.took_task_at = utcnow()

        def beat(self, worker: Any) -> None:
            now = utcnow()
            worked_at = now if state.active_requests else self.took_task_at
            with flask_app.app_context():
                try:
                    record_worker_heartbeat(worker.hostname, now, worked_at)
                    db.session.commit()
                except SQLAlchemyError as error:
                    db.session.rollback()
                    log.warning("worker heartbeat not recorded: %s", type(error).__name__)
                finally:
                    db.session.remove()

        def start(self, worker: Any) -> None:
            task_received.connect(self.took_task, weak=False)
            self.beat(worker)
            self.timer_entry = worker.timer.call_repeatedly(
                HEARTBEAT_INTERVAL.total_seconds(), self.beat, (worker,)
            )

        def stop(self, worker: Any) -> None:
            task_received.disconnect(self.took_task)
            if self.timer_entry is not None:
                self.timer_entry.cancel()

    return Heartbeat
