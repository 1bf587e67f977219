"""Connected calendars: inbound CalDAV sync of busy time (``sync``), the CalDAV side
(``caldav_calendar``), iCalendar expansion (``busy_time``) and the failures (``errors``)."""

from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.sync import (
    SyncResult,
    probe_connection,
    sync_all_connections,
    sync_connection,
)

__all__ = [
    "CalendarSyncError",
    "SyncResult",
    "probe_connection",
    "sync_all_connections",
    "sync_connection",
]
