"""gunicorn's configuration for ``web`` (the Procfile) and ``make run``; gunicorn reads it by
itself when started from the project root. Command-line options override it.

Serving stack. Every worker is a gevent worker: each connection is a
greenlet, so clients that send their request a byte at a time cost a greenlet each, not a
thread, and never hold up anyone else (gunicorn's threaded worker hands a connection to a
thread as soon as its first byte arrives, and 8 slow clients froze 2×4 threads). psycopg
cooperates with gevent by itself; every wait on PostgreSQL or Redis is bounded, a request's
waits on PostgreSQL in all (``app/deadlines.py``, ``app/database.py``).
What a deployment still needs in front: a load balancer
or proxy that ends TLS and drops connections idle for long (Heroku's router, an ALB, nginx with
``client_header_timeout``); the gevent workers hold ``WEB_CONNECTIONS`` open connections each.

Settings from the environment (``app.config.Settings``, checked here, so a bad one stops the
server before it forks):

* ``PORT`` (5000) and ``HOST`` (0.0.0.0): where to listen; ``make run`` sets 127.0.0.1.
* ``WEB_CONCURRENCY`` (2): worker processes, when ``REDIS_URL`` is set. Without it the rate
  limits are counted in memory, which holds for one process only, so the embedded default
  serves from one process and a start with more is refused.
* ``WEB_CONNECTIONS`` (1000): open connections per gevent worker.
* ``WEB_TIMEOUT`` (30): seconds a worker may go silent before it is restarted.
* ``PROMETHEUS_MULTIPROC_DIR``: where the workers' metrics are counted together (``/metrics``);
  a fresh folder of this server's own when unset. Emptied when the server starts.

Limits of the request, answered by gunicorn itself (HTML, not the API's JSON envelope): a
request line over 8190 bytes is a 414, more than 100 header fields or a header field over
8190 bytes a 431 or 400. Bodies over 1 MiB are the app's 413 (``MAX_CONTENT_LENGTH``).

Access log: one JSON object a line on stdout (``JsonAccessLogger``), with the request id the app
answered with; invitation and password-reset tokens in paths are masked, and no header values
(keys, cookies) are logged.
"""

import json
import os
import shutil
import tempfile
from datetime import UTC, datetime

from gunicorn.glogging import Logger

from app.config import environment_settings
from app.secret_paths import mask_secret_paths

settings = environment_settings()

bind = f"{settings.host}:{settings.port}"
workers = settings.web_concurrency if settings.redis_url else 1
worker_class = "gevent"
worker_connections = settings.web_connections
timeout = settings.web_timeout
graceful_timeout = 20
keepalive = 5

limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

accesslog = "-"
# No run-time control socket: several servers on one machine would share its path.
control_socket_disable = True

# prometheus_client itself reads PROMETHEUS_MULTIPROC_DIR, in every worker.
if not settings.prometheus_multiproc_dir:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="calendar-web-metrics-")


class JsonAccessLogger(Logger):
    """gunicorn's access log as JSON lines: one object per request, fields a log pipeline can
    index without parsing a format string."""

    def access(self, resp, req, environ, request_time):
        if not (self.cfg.accesslog or self.cfg.logconfig or self.cfg.syslog):
            return
        headers = dict((name.lower(), value) for name, value in resp.headers)
        line = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "type": "access",
            "request_id": headers.get("x-request-id"),
            "remote_addr": environ.get("REMOTE_ADDR"),
            "method": environ.get("REQUEST_METHOD"),
            "path": mask_secret_paths(environ.get("PATH_INFO", "")),
            "status": resp.status_code,
            "bytes": getattr(resp, "sent", None),
            "duration_ms": round(request_time.total_seconds() * 1000, 2),
            "user_agent": environ.get("HTTP_USER_AGENT"),
            "pid": os.getpid(),
        }
        try:
            self.access_log.info(json.dumps(line, ensure_ascii=False))
        except Exception:
            self.exception("Failed to write an access log line")


logger_class = JsonAccessLogger


def on_starting(server):
    """Refuse several workers without shared rate-limit counts: each would count on its own,
    and a key would get its limit once per worker. Start the metrics afresh."""
    if not settings.redis_url and server.cfg.workers > 1:
        raise SystemExit(
            f"gunicorn: {server.cfg.workers} workers need REDIS_URL (rate limits are counted in"
            " memory without it, which holds for one process only); set REDIS_URL or run"
            " --workers 1 (its gevent worker serves many requests at once)"
        )
    metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    shutil.rmtree(metrics_dir, ignore_errors=True)
    os.makedirs(metrics_dir, exist_ok=True)
    server.log.info("metrics of this server's workers are counted in %s", metrics_dir)


def child_exit(server, worker):
    """A dead worker's live gauges no longer count; its counters do (they only grow)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
