"""Row ids as people type them into URLs.

Id columns are PostgreSQL ``integer``; a larger number names nothing, yet sent to the database
it fails (out of range) instead of finding nothing. Lookups check first, so a huge id in a URL
is a 404 like any other unknown id.
"""

from __future__ import annotations

from app.models.types import MAX_ID


def is_storable_id(value: int) -> bool:
    """Whether ``value`` can be an id at all (1 to 2³¹ − 1)."""
    return 1 <= value <= MAX_ID
