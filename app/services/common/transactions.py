"""Who commits.

A use case flushes, and its caller (a view, a task, a command) commits once at its boundary:
one use case, one transaction, rolled back whole when anything in it fails.

A few services are jobs rather than use cases, and own their transactions:

- a job of many independent pieces (sync every connection, deliver to every subscriber), each
  of which must be kept when a later one fails;
- a job that must not hold a transaction open while it waits on another server (an outbox
  handler calling a calendar, a mail or a webhook server);
- a record that must be kept whatever becomes of the caller's transaction (the mail log).

Those are marked with ``owns_transactions`` and their docstrings say which of these they are;
``tests/conventions/test_transaction_owners.py`` fails for a commit anywhere else under
``app/services``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Job = TypeVar("Job", bound=Callable[..., Any])


def owns_transactions(job: Job) -> Job:
    """Mark ``job`` as committing (or rolling back) itself; returns it unchanged."""
    job.owns_transactions = True  # type: ignore[attr-defined]
    return job
