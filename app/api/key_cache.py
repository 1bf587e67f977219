"""A per-process memory of recently seen API keys, so most agent requests authenticate without
a database round trip.

What is kept is the key as ``authenticate_api_key`` loads it (the key, its sub account and the
calendar settings), detached from any session, for ``API_KEY_CACHE_SECONDS`` (1 by default).
A request takes a copy into its own session with ``Session.merge(load=False)``: no SQL, and
nothing a request does to its copy reaches the kept one. Every check (active, expiry, a usable
sub account, permissions) still runs on every request, against the kept values.

How changes reach it:

* in this process, at once: any ORM change to an API key, a sub account or calendar settings
  (the dashboard's deactivation, a test's direct edit) forgets every kept key when it is
  flushed;
* in every other process, within ``API_KEY_CACHE_SECONDS``: a kept key is read again from the
  database once it is that old, so a deactivation (or a changed timezone) made elsewhere takes
  effect within a second everywhere. Expiry is exact, since it is compared on every request.
"""

from __future__ import annotations

import threading
import time
import weakref
from datetime import datetime
from typing import Any

from cachetools import TTLCache
from sqlalchemy import event
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.models import ApiKey, CalendarSettings, SubAccount

# Beyond this many keys the least recently used are let go rather than the memory growing
# without bound.
MAX_KEPT_KEYS = 10_000

_CACHED_MODELS = (ApiKey, SubAccount, CalendarSettings)
_all_caches: weakref.WeakSet[KeyCache] = weakref.WeakSet()


def _monotonic() -> float:
    """The cache's clock, looked up at each call (tests move ``time`` in this module)."""
    return time.monotonic()


class KeyCache:
    """Keys by digest, each kept for ``max_age_seconds`` from when it was read from the
    database (a ``cachetools.TTLCache``: one read at exactly that age is a miss). Request
    threads share it, and a flush in any of them empties it: every use is under its lock."""

    def __init__(self, max_age_seconds: float) -> None:
        self.max_age_seconds = max_age_seconds
        self._kept: TTLCache[str, ApiKey] = TTLCache(
            maxsize=MAX_KEPT_KEYS, ttl=max_age_seconds, timer=_monotonic
        )
        self._lock = threading.Lock()
        _all_caches.add(self)

    def get(self, digest: str) -> ApiKey | None:
        """The kept key for ``digest``, if read less than ``max_age_seconds`` ago."""
        with self._lock:
            return self._kept.get(digest)

    def keep(self, digest: str, api_key: ApiKey) -> None:
        """Keep ``api_key`` (detached: its session has let it go, or will at the request's
        end) as read just now."""
        if self.max_age_seconds <= 0:
            return
        with self._lock:
            self._kept[digest] = api_key

    def note_use(self, digest: str, when: datetime) -> None:
        """The key's ``last_used_at`` was just written: the kept copy says so too, so the next
        requests do not write it again (set as loaded, not as a change, so merging stays
        SQL-free)."""
        with self._lock:
            api_key = self._kept.get(digest)
        if api_key is not None:
            set_committed_value(api_key, "last_used_at", when)

    def forget_all(self) -> None:
        with self._lock:
            self._kept.clear()


def forget_every_kept_key() -> None:
    for cache in list(_all_caches):
        cache.forget_all()


@event.listens_for(Session, "after_flush")
def _forget_on_change(session: Session, flush_context: Any) -> None:
    """A key, sub account or calendar setting changed through the ORM in this process: no
    kept copy may outlive the change."""
    for instance in (*session.new, *session.dirty, *session.deleted):
        if isinstance(instance, _CACHED_MODELS):
            forget_every_kept_key()
            return


@event.listens_for(Session, "do_orm_execute")
def _forget_on_bulk_change(state: Any) -> None:
    """The same for ``update()``/``delete()`` statements on those tables (but not the
    ``lastUsedAt`` stamp, which ``KeyCache.note_use`` keeps up to date)."""
    if not (state.is_update or state.is_delete) or state.execution_options.get("key_use_stamp"):
        return
    if any(mapper.class_ in _CACHED_MODELS for mapper in state.all_mappers):
        forget_every_kept_key()
