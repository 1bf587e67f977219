"""SQLAlchemy models, one module per aggregate; imported here so Alembic sees them all."""

from app.models.api_key import ApiKey, OAuthClient, Permission
from app.models.availability import (
    AvailabilityProfile,
    BlockedTime,
    BlockedTimeSource,
    DateOverride,
    WeeklyHours,
)
from app.models.booking import (
    ACTIVE_STATUSES,
    Attendee,
    Booking,
    BookingChange,
    BookingDayCount,
    BookingHost,
    BookingStatus,
    Contact,
)
from app.models.calendar_connection import (
    CalendarConnection,
    CalendarItem,
    CalendarWriteLease,
    ConnectedCalendar,
    ConnectionKind,
    OAuthConsent,
    PushChannel,
    WrittenEvent,
)
from app.models.calendar_version import CalendarVersion
from app.models.event_type import (
    MEETING_KINDS,
    EventType,
    EventTypeHost,
    HostAssignment,
    LocationKind,
)
from app.models.hold import SlotHold
from app.models.host import Host
from app.models.notification import MailMessage, MailStatus
from app.models.oauth import OAuthCode, OAuthToken
from app.models.operations import WorkerHeartbeat
from app.models.outbox import DeliveryStatus, OutboxDelivery, OutboxEvent
from app.models.reminder import BookingReminder, Reminder, ReminderChannel, ReminderStatus
from app.models.tenancy import (
    Agency,
    CalendarSettings,
    DashboardSession,
    Invitation,
    PasswordReset,
    Role,
    SubAccount,
    User,
)
from app.models.webhook import (
    WebhookAttempt,
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookSubscription,
)

__all__ = [
    "ACTIVE_STATUSES",
    "MEETING_KINDS",
    "Agency",
    "ApiKey",
    "Attendee",
    "AvailabilityProfile",
    "BlockedTime",
    "BlockedTimeSource",
    "Booking",
    "BookingChange",
    "BookingDayCount",
    "BookingHost",
    "BookingReminder",
    "BookingStatus",
    "CalendarConnection",
    "CalendarItem",
    "CalendarSettings",
    "CalendarVersion",
    "CalendarWriteLease",
    "ConnectedCalendar",
    "ConnectionKind",
    "Contact",
    "DashboardSession",
    "DateOverride",
    "DeliveryStatus",
    "EventType",
    "EventTypeHost",
    "Host",
    "HostAssignment",
    "Invitation",
    "LocationKind",
    "MailMessage",
    "MailStatus",
    "OAuthClient",
    "OAuthCode",
    "OAuthConsent",
    "OAuthToken",
    "OutboxDelivery",
    "OutboxEvent",
    "PasswordReset",
    "Permission",
    "PushChannel",
    "Reminder",
    "ReminderChannel",
    "ReminderStatus",
    "Role",
    "SlotHold",
    "SubAccount",
    "User",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookDeliveryStatus",
    "WebhookSubscription",
    "WeeklyHours",
    "WorkerHeartbeat",
    "WrittenEvent",
]
