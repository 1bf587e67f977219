"""The worker's own ``/metrics``: what its pool processes counted (calendar syncs, deliveries),
served by the worker's main process on ``WORKER_METRICS_PORT`` (bound to
``WORKER_METRICS_HOST``, 127.0.0.1 unless set: private unless configured). Workers often run
on machines without a web process, so they cannot rely on one to show their counts.

The pool processes count into a folder of the worker's own, which must be chosen before
``prometheus_client`` is first imported: ``count_in_own_folder`` runs first thing in the
``celery -A worker`` entry point.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from celery.signals import worker_init

from app.config import environment_settings


def count_in_own_folder() -> None:
    # prometheus_client itself reads PROMETHEUS_MULTIPROC_DIR, in every pool process.
    if environment_settings().worker_metrics_port:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="calendar-worker-metrics-")


@worker_init.connect
def serve_metrics(**_: Any) -> None:
    settings = environment_settings()
    if not settings.worker_metrics_port:
        return
    from prometheus_client import start_http_server

    from app.metrics import scrape_registry

    start_http_server(
        settings.worker_metrics_port, addr=settings.worker_metrics_host, registry=scrape_registry()
    )
