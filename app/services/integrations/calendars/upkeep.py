"""What the worker does for one connection each period (``calendars.sync``): sync it, then
follow up on the outcome.

- synced: the bookings made before the connection wrote back are written into it, if it asks
  for them (``write_back.write_existing_bookings``);
- failed in a way only a person can mend: its people are told, once (``health.tell_people``);
- a Google or Microsoft connection's push channels are made, renewed or stopped
  (``push.keep_channels``), so its next changes are pushed.
"""

from __future__ import annotations

from datetime import datetime

from app.extensions import db
from app.services.common.transactions import owns_transactions
from app.services.integrations.calendars.health import PageLink, tell_people
from app.services.integrations.calendars.push import keep_channels
from app.services.integrations.calendars.sync import SyncResult, sync_connection
from app.services.integrations.calendars.write_back import write_existing_bookings


@owns_transactions
def sync_and_follow_up(
    connection_id: int, *, now: datetime, page: PageLink, timeout: float | None = None
) -> SyncResult:
    """Sync the connection and commit the outcome, then follow up (the module docstring): a
    job that must not hold a transaction open while it waits on another server (the
    calendar's, the mail server). ``page`` builds the link to a connection's dashboard page.
    The follow-up commits what it records too, before the channels are kept."""
    result = sync_connection(connection_id, now=now, timeout=timeout)
    db.session.commit()
    if result.ok:
        write_existing_bookings(connection_id, now=now, timeout=timeout)
    elif result.status == "failed":
        tell_people(connection_id, now=now, page=page)
    db.session.commit()
    keep_channels(connection_id, now)
    return result
