"""The worker's heartbeat: a Celery bootstep that records, every ``HEARTBEAT_INTERVAL``, that
this worker is alive (``/readyz`` reports workers not seen for a minute). It runs on the
worker's own timer in the main process, so a worker whose pool is busy with long tasks still
beats, and one that is gone stops."""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps
from flask import Flask
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.models.types import utcnow
from app.services.health import HEARTBEAT_INTERVAL, record_worker_heartbeat

log = logging.getLogger(__name__)


def heartbeat_step(flask_app: Flask) -> type[bootsteps.StartStopStep]:
    """The bootstep class for ``flask_app``'s worker."""

    def beat(worker: Any) -> None:
        with flask_app.app_context():
            try:
                record_worker_heartbeat(worker.hostname, utcnow())
                db.session.commit()
            except SQLAlchemyError as error:
                db.session.rollback()
                log.warning("worker heartbeat not recorded: %s", type(error).__name__)
            finally:
                db.session.remove()

    class Heartbeat(bootsteps.StartStopStep):
        requires = ("celery.worker.components:Timer",)

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            super().__init__(worker, **kwargs)
            self.timer_entry: Any = None

        def start(self, worker: Any) -> None:
            beat(worker)
            self.timer_entry = worker.timer.call_repeatedly(
                HEARTBEAT_INTERVAL.total_seconds(), beat, (worker,)
            )

        def stop(self, worker: Any) -> None:
            if self.timer_entry is not None:
                self.timer_entry.cancel()

    return Heartbeat
