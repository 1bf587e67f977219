"""Connected calendars: the inbound sync of busy time (``sync``), write-back of bookings
(``write_back``), the connections themselves (``connections``), each kind of provider behind
one interface (``providers``: CalDAV, …), iCalendar expansion (``busy_time``) and the failures
(``errors``)."""

from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.sync import (
    SyncResult,
    probe_connection,
    sync_connection,
)

__all__ = [
    "CalendarSyncError",
    "SyncResult",
    "probe_connection",
    "sync_connection",
]
