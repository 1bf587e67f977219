"""The rate limit in one Redis round trip per request.

Flask-Limiter asks its storage twice per request: once to count the request against the
moving window (``acquire_entry``, a Lua script), and once more, for the ``X-RateLimit-*``
headers, to read the window (``get_moving_window``, another script). ``OneTripRedisStorage``
counts and reads in one script and keeps the window it read for the header step of the same
request, so the second call costs nothing. The window is the same exact sliding log as
limits' own: the counting half of the script is limits' ``acquire_moving_window``, the reading
half its ``moving_window``, both on the state right after this request counted.

Used for ``redis://`` and ``rediss://`` URLs (``storage_uri``); anything else (sentinel,
cluster, memory) keeps limits' own storage.
"""

from __future__ import annotations

import contextvars
import time
from typing import Any

from limits.storage import RedisStorage

SCHEME_PREFIX = "calendar+"

# Counts the request (when the window has room) and returns {acquired, oldest, count}: the
# oldest timestamp still inside the window and how many entries are in it, after counting.
ACQUIRE_AND_READ = """
local timestamp = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local expiry = tonumber(ARGV[3])
local amount = tonumber(ARGV[4])
local acquired = 0

if amount <= limit then
    local entry = redis.call('lindex', KEYS[1], limit - amount)
    if not (entry and tonumber(entry) >= timestamp - expiry) then
        local entries = {}
        for i = 1, amount do
            entries[i] = timestamp
        end
        for i = 1, #entries, 5000 do
            redis.call('lpush', KEYS[1], unpack(entries, i, math.min(i + 4999, #entries)))
        end
        redis.call('ltrim', KEYS[1], 0, limit - 1)
        redis.call('expire', KEYS[1], expiry)
        acquired = 1
    end
end

local target = timestamp - expiry
local low, high, found = 0, limit - 1, nil
while low <= high do
    local mid = math.floor((low + high) / 2)
    local value = tonumber(redis.call('lindex', KEYS[1], mid))
    if value and value >= target then
        found = mid
        low = mid + 1
    else
        high = mid - 1
    end
end
if found then
    return {acquired, tostring(redis.call('lindex', KEYS[1], found)), found + 1}
end
return {acquired, false, 0}
"""

# The window the last count of this request (greenlet or thread) read: (key, start, count).
_last_read: contextvars.ContextVar[tuple[str, float, int] | None] = contextvars.ContextVar(
    "rate_limit_window_read", default=None
)


def storage_uri(redis_url: str) -> str:
    """The limiter's storage URI for ``redis_url``."""
    if redis_url.startswith(("redis://", "rediss://")):
        return SCHEME_PREFIX + redis_url
    return redis_url


class OneTripRedisStorage(RedisStorage):
    STORAGE_SCHEME = [SCHEME_PREFIX + "redis", SCHEME_PREFIX + "rediss"]

    def __init__(self, uri: str, **options: Any) -> None:
        super().__init__(uri.removeprefix(SCHEME_PREFIX), **options)

    def initialize_storage(self, uri: str) -> None:
        super().initialize_storage(uri)
        self.lua_acquire_and_read = self.get_connection().register_script(ACQUIRE_AND_READ)

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        prefixed = self.prefixed_key(key)
        timestamp = time.time()
        _last_read.set(None)
        acquired, oldest, count = self.lua_acquire_and_read(
            [prefixed], [timestamp, limit, expiry, amount]
        )
        start = float(oldest) if oldest else timestamp
        _last_read.set((key, start, int(count)))
        return bool(acquired)

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """The window this request's count just read, once; otherwise a fresh read."""
        read = _last_read.get()
        if read is not None and read[0] == key:
            _last_read.set(None)
            return read[1], read[2]
        return super().get_moving_window(key, limit, expiry)
