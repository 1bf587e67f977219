"""Why a calendar connection's sync failed. Every message is safe to store and show: it names
the server and what went wrong, never a password."""

from __future__ import annotations


class CalendarSyncError(Exception):
    """A sync that could not complete. ``retryable``: trying again later may succeed by
    itself (the server was down or slow); otherwise someone has to change something first
    (credentials, the calendar's name, the calendar's data)."""

    retryable = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ServerUnreachable(CalendarSyncError):
    """No connection (refused, unknown host, TLS failure)."""


class ServerTimeout(CalendarSyncError):
    """Connected, or tried to, but no answer in time."""


class ServerError(CalendarSyncError):
    """The server answered, but not as CalDAV says it should (5xx, unexpected status, a body
    that is not the XML it should be)."""


class NotCalDAV(CalendarSyncError):
    """The server answered, but with something else than CalDAV: a web page (the URL is a
    web site's, not its CalDAV address, or a sign-in or proxy page is in the way). It answers
    the same until someone changes the URL or the way to the server."""

    retryable = False


class AuthenticationFailed(CalendarSyncError):
    retryable = False


class CalendarNotFound(CalendarSyncError):
    """No calendar at the URL, none with the name, or several and none named."""

    retryable = False


class MalformedCalendarData(CalendarSyncError):
    """An event the service cannot read (invalid or unsupported iCalendar)."""

    retryable = False


class ItemTooLarge(MalformedCalendarData):
    """An item larger than the service reads (an event with a large file attached inline): the
    server sends it again every time until someone makes it smaller."""


class TooManyBusyPeriods(MalformedCalendarData):
    """More busy periods in the window than a calendar plausibly has (a runaway RRULE)."""


class CredentialsUnreadable(CalendarSyncError):
    """The stored password cannot be decrypted (``SECRET_KEY`` changed)."""

    retryable = False


class AddressRefused(CalendarSyncError):
    """The server's name leads (now) to an address the service may not reach (loopback,
    private, …), directly or through a redirect: someone has to change the URL, or it is an
    attack. Nothing was sent there."""

    retryable = False
