"""The availability cache: slot sets cached per calendar version, so that the questions agents
repeat cost one version read instead of loading and converting the calendar's busy time again.

The calendar version (``app.models.calendar_version``) changes in the transaction of every
change that can move availability. A question's slots are computed once per version and query
(``compute_slot_set``: working hours, busy time, the event type's rules, without "now") and
cached; each question reads the version, finds the cached set, and applies the instant to it
(``SlotSet.offer``: notice, horizon and live holds, to the second). The answer's tag names the
version, the query and what the instant cut, so two answers with one tag are the same answer.

Cached in Redis when ``REDIS_URL`` is set (every process shares them, for
``AVAILABILITY_KEEP_SECONDS``), and in each process's memory in front of it (the last
``LOCAL_SETS`` sets; no round trip at all for a set this process has seen). Without Redis,
the memory alone. An unreachable or frozen Redis costs one ``REDIS_TIMEOUT_S`` and is then left
alone for ``REDIS_RETRY_SECONDS``: the answers are computed as before it existed.

A set is cached only if the version read after computing it is the one read before: reads
between two equal readings saw no change (every change draws a new version), so the set is the
calendar at that version. Writes never use cached sets: their time rule runs under the calendar's
lock on what is stored (``app.services.bookings.time_claims``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from cachetools import LRUCache
from sqlalchemy import text

from app.config import Settings
from app.extensions import db
from app.models import CalendarConnection, CalendarVersion, SubAccount
from app.scheduling.offered import Offer, SlotSet
from app.services.availability.open_time import AvailabilityQuery, compute_slot_set

LOG = logging.getLogger(__name__)

LOCAL_SETS = 512
REDIS_RETRY_SECONDS = 5.0
# A calendar changing while its slots are computed: computed again, this many times at most.
TRIES = 3


# As text: every repeated question reads it, and a textual statement costs SQLAlchemy half
# the time of the ORM's select (0.15 against 0.3 ms, measured on PostgreSQL).
_VERSION = text(
    f"SELECT version FROM {CalendarVersion.__tablename__} WHERE sub_account_id = :sub_account_id"
)


def calendar_version(sub_account_id: int) -> int:
    """The calendar's current version; 0 for a calendar that never changed."""
    version = db.session.execute(_VERSION, {"sub_account_id": sub_account_id}).scalar()
    return version or 0


# The version, and whether any calendar is connected (an answer then says how fresh their busy
# time is, which costs a read of its own): one statement still, for every repeated question.
_VERSION_AND_CONNECTED = text(
    f"SELECT ({_VERSION.text}),"
    f" EXISTS (SELECT 1 FROM {CalendarConnection.__tablename__}"
    " WHERE sub_account_id = :sub_account_id AND active = :active)"
)


def version_and_connected(sub_account_id: int) -> tuple[int, bool]:
    """``calendar_version``, and whether the sub account has an active connected calendar."""
    version, connected = db.session.execute(
        _VERSION_AND_CONNECTED, {"sub_account_id": sub_account_id, "active": True}
    ).one()
    return version or 0, bool(connected)


def query_key(query: AvailabilityQuery) -> str:
    """A short digest of the question as asked (the window as written: its meaning depends on
    timezones the version covers)."""
    asked = (
        query.event_type_id,
        query.duration,
        query.timezone,
        query.start_date.value.isoformat(),
        query.start_date.is_date,
        query.end_date.value.isoformat(),
        query.end_date.is_date,
        query.exclude_booking_id,
        query.host_id,
    )
    return hashlib.blake2b(repr(asked).encode(), digest_size=8).hexdigest()


class SlotSetStore:
    """Kept slot sets by key: this process's memory (the ``local_sets`` used last, a
    ``cachetools.LRUCache`` under a lock: request threads share it), then Redis when
    configured."""

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        timeout_s: float = Settings.model_fields["redis_timeout_s"].default,
        keep_seconds: int = Settings.model_fields["availability_keep_seconds"].default,
        local_sets: int = LOCAL_SETS,
    ) -> None:
        self._local: LRUCache[str, SlotSet] = LRUCache(maxsize=local_sets)
        self._lock = threading.Lock()
        self._keep_seconds = keep_seconds
        self._redis = (
            redis.Redis.from_url(
                redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
            )
            if redis_url
            else None
        )
        self._redis_resting_until = 0.0

    def get(self, key: str) -> SlotSet | None:
        with self._lock:
            found = self._local.get(key)
        if found is not None:
            return found
        plain = self._ask_redis(lambda client: client.get(key))
        if plain is None:
            return None
        found = SlotSet.from_plain(json.loads(plain))
        self._keep_locally(key, found)
        return found

    def put(self, key: str, slot_set: SlotSet) -> None:
        self._keep_locally(key, slot_set)
        text = json.dumps(slot_set.to_plain(), separators=(",", ":"))
        self._ask_redis(lambda client: client.set(key, text, ex=self._keep_seconds))

    def forget_local(self) -> None:
        """This process's memory emptied (tests; Redis keeps its sets)."""
        with self._lock:
            self._local.clear()

    def _keep_locally(self, key: str, slot_set: SlotSet) -> None:
        if self._local.maxsize <= 0:
            return  # no memory: Redis alone (cachetools refuses an item larger than maxsize)
        with self._lock:
            self._local[key] = slot_set

    def _ask_redis(self, ask: Callable[[redis.Redis], Any]) -> Any:
        if self._redis is None or time.monotonic() < self._redis_resting_until:
            return None
        try:
            return ask(self._redis)
        except redis.RedisError as error:
            self._redis_resting_until = time.monotonic() + REDIS_RETRY_SECONDS
            LOG.warning(
                "Redis not answering for the availability cache (%s): computing answers for %s s",
                type(error).__name__,
                REDIS_RETRY_SECONDS,
            )
            return None


def availability_store(configured: Settings) -> SlotSetStore | None:
    """The app's store: Redis (``REDIS_URL``) behind this process's memory, or the memory
    alone; none when ``AVAILABILITY_KEEP_SECONDS`` is 0 (every answer computed)."""
    keep_seconds = configured.availability_keep_seconds
    if keep_seconds <= 0:
        return None
    return SlotSetStore(
        configured.redis_url, timeout_s=configured.redis_timeout_s, keep_seconds=keep_seconds
    )


@dataclass(frozen=True)
class CachedAnswer:
    """Availability at one instant: the cached set, what the instant offers of it, and the tag
    (a weak ETag's value) that names both."""

    tag: str
    slot_set: SlotSet
    offer: Offer
    connected: bool = False  # the calendar has connected calendars (their freshness to say)


def availability_at(
    sub_account: SubAccount, query: AvailabilityQuery, now: float, store: SlotSetStore | None
) -> CachedAnswer:
    """The calendar's availability for ``query`` at ``now`` (POSIX seconds), from the set cached
    for its current version, computed and cached first if there is none. Raises as
    ``compute_slot_set`` does."""
    asked = query_key(query)
    connected = False
    for _ in range(TRIES):
        version, connected = version_and_connected(sub_account.id)
        key = f"availability:{sub_account.id}:{version:x}:{asked}"
        slot_set = store.get(key) if store is not None else None
        if slot_set is None:
            slot_set = compute_slot_set(sub_account, query)
            if calendar_version(sub_account.id) != version:
                continue  # changed while computing: the set may mix two versions
            if store is not None:
                store.put(key, slot_set)
        offer = slot_set.offer(now)
        return CachedAnswer(f"{version:x}.{asked}.{offer.key}", slot_set, offer, connected)
    # Changed during every try: the last set is the calendar at no one version. It is answered
    # (it is as fresh as any) under a tag that names none, and so never matches.
    assert slot_set is not None  # computed in the last try
    offer = slot_set.offer(now)
    return CachedAnswer(f"changing.{secrets.token_hex(8)}", slot_set, offer, connected)
