"""The API with library internals swapped for the plain library path, for ``bench.hot_path
--compare``: ``gunicorn -c gunicorn.conf.py bench.plain_paths:app`` serves ``wsgi:app`` except
for what ``HOT_PATH_PLAIN`` (comma-separated) names:

* ``poll``: pooled connections are checked with gevent's ``select.poll`` (the monkey-patched
  one) instead of the operating system's (``app.database``).

The swap keeps the answers (both polls see the same socket); only the cost differs.
Bench-only: nothing under ``app/`` reads ``HOT_PATH_PLAIN``. (Two more were measured until
what they compared was removed:
``limiter``, the one-trip rate-limit storage against limits' own ``RedisStorage``, and
``dump``, compiled dump plans against marshmallow's own ``Schema.dump``: docs/performance.md,
"Library internals: kept and removed".)
"""

from __future__ import annotations

import os
import select

from app import create_app

CHOICES = ("poll",)
PLAIN = {name for name in os.environ.get("HOT_PATH_PLAIN", "").split(",") if name}
if unknown := PLAIN - set(CHOICES):
    raise SystemExit(f"HOT_PATH_PLAIN: unknown {sorted(unknown)}; choose from {CHOICES}")

if "poll" in PLAIN:
    from app import database

    database._unpatched_poll = select.poll  # patched by gunicorn's gevent worker by now

app = create_app()
