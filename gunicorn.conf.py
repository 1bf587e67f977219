"""gunicorn's configuration for ``web`` (the Procfile) and ``make run``; gunicorn reads it by
itself when started from the project root. Command-line options override it.

Settings from the environment:

* ``PORT`` (5000) and ``HOST`` (0.0.0.0): where to listen; ``make run`` sets 127.0.0.1.
* ``WEB_CONCURRENCY`` (2): worker processes, when ``REDIS_URL`` is set. Without it the rate
  limits are counted in memory, which holds for one process only, so the embedded default
  serves from one process and a start with more is refused.
* ``WEB_THREADS`` (4): threads per worker.

Limits of the request head, answered by gunicorn itself (HTML, not the API's JSON envelope):
a request line over 8190 bytes is a 414, more than 100 header fields or a header field over
8190 bytes a 431 or 400.
"""

import os

redis_url = os.environ.get("REDIS_URL", "")

bind = f"{os.environ.get('HOST', '0.0.0.0')}:{os.environ.get('PORT', '5000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2")) if redis_url else 1
threads = int(os.environ.get("WEB_THREADS", "4"))
timeout = 30
graceful_timeout = 20
accesslog = "-"

limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190


def on_starting(server):
    """Refuse several workers without shared rate-limit counts: each would count on its own,
    and a key would get its limit once per worker."""
    if not os.environ.get("REDIS_URL") and server.cfg.workers > 1:
        raise SystemExit(
            f"gunicorn: {server.cfg.workers} workers need REDIS_URL (rate limits are counted in"
            " memory without it, which holds for one process only); set REDIS_URL or run"
            " --workers 1 (threads are fine)"
        )
