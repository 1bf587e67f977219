"""What the service did, counted where it happens: the Prometheus counters and histograms.

They live below every layer that counts (services, the API's rate limit, the worker's tasks)
and import nothing of the app, so counting never drags the web layer in; ``app.metrics``
exposes them at ``/metrics``, with the gauges it reads at scrape time.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

HTTP_REQUESTS = Counter(
    "calendar_http_requests_total",
    "HTTP requests answered, by route and status",
    ["method", "route", "status"],
)
HTTP_LATENCY = Histogram(
    "calendar_http_request_duration_seconds",
    "Time from the request reaching the app to its answer, by route",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
BOOKING_EVENTS = Counter(
    "calendar_booking_events_total",
    "Booking changes committed (booking.created, booking.rescheduled, booking.cancelled, …)",
    ["event"],
)
BOOKING_CONFLICTS = Counter(
    "calendar_booking_conflicts_total",
    "Creates and moves refused because the time is taken, by what takes it",
    ["cause"],
)
IDEMPOTENT_REPLAYS = Counter(
    "calendar_idempotent_replays_total",
    "Creates answered with the booking an earlier request with the same idempotencyKey made",
)
RATE_LIMITED = Counter(
    "calendar_rate_limit_rejections_total",
    "Requests refused with 429, by the bucket that was full (an API key or an address)",
    ["bucket"],
)
CALENDAR_SYNCS = Counter(
    "calendar_calendar_syncs_total",
    "Connected-calendar syncs run by the worker, by outcome",
    ["outcome"],
)
DELIVERIES = Counter(
    "calendar_deliveries_total",
    "Outbox deliveries attempted (write-back, notifications, webhooks), by outcome",
    ["handler", "outcome"],
)
LIVE_CHECKS = Counter(
    "calendar_live_checks_total",
    "Writes that asked the connected calendars about their time, by outcome (clear, busy,"
    " unanswered)",
    ["outcome"],
)
LIVE_CHECK_SECONDS = Histogram(
    "calendar_live_check_duration_seconds",
    "How long asking the connected calendars took (bounded by CALENDAR_LIVE_CHECK_TIMEOUT_S)",
    buckets=(0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0),
)
PUSH_NOTIFICATIONS = Counter(
    "calendar_push_notifications_total",
    "Push notifications received from calendar providers, by provider and outcome (accepted:"
    " a sync asked for; acknowledged: nothing new to read; refused: unknown channel, wrong"
    " secret or connection off)",
    ["provider", "outcome"],
)
PUSH_CHANNEL_CHANGES = Counter(
    "calendar_push_channel_changes_total",
    "Push channels made, renewed and stopped at the providers",
    ["provider", "change"],
)
SYNC_LAG_SECONDS = Histogram(
    "calendar_sync_lag_seconds",
    "From a change at the provider (the time it says the event changed) to its busy time"
    " stored, for changes read incrementally",
    buckets=(1, 2, 5, 10, 30, 60, 120, 300, 900, 1800, 3600),
)
