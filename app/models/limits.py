"""The field limits, named once: the column sizes the models declare and every place that
checks or shows a value before it reaches a column (the API's request and answer schemas,
provisioning and the services' documents, the dashboard's forms, the OpenAPI document).

A limit lives here, beside the columns, because the column is what makes it a rule: a longer
value could not be stored. Everything above the models imports it from here instead of
restating the number, so a column that grows takes its checks along. Plain constants only (no
SQLAlchemy), so any layer above the models can read them cheaply. Migrations keep their own
literals: they are the history of the schema, not its current rules.
"""

from __future__ import annotations

# How many bookings a list answers is a term of the API, not a column: named in app.api_terms.
from app.api_terms import LIST_LIMIT_DEFAULT as LIST_LIMIT_DEFAULT
from app.api_terms import LIST_LIMIT_MAX as LIST_LIMIT_MAX

# Names and titles: agencies, sub accounts, users' and attendees' names, event types,
# availability profiles, API keys, webhooks, calendar connections, a booking's title. Also the
# client-chosen tokens stored as text: idempotency keys and the hold tokens shown to clients.
NAME_MAX = 255
# An email address (RFC 5321's path limit); addresses are stored lower-cased.
EMAIL_MAX = 254
PHONE_MAX = 50
# Where a meeting happens (event types, calendar defaults, bookings).
LOCATION_MAX = 500
# Why something was cancelled or blocked.
REASON_MAX = 500
# A booking's notes for the people attending.
DESCRIPTION_MAX = 5000
# An IANA timezone name (the longest real one is about 30 characters).
TIMEZONE_MAX = 64
# A booking's iCalendar UID.
UID_MAX = 64
# SHA-256 digests of tokens and keys, in hex.
DIGEST_LENGTH = 64
# The random key a manage link names its attendee by: 16 bytes, base64url without padding.
LINK_KEY_LENGTH = 22
# A webhook's target URL; a CalDAV server's or calendar's URL.
WEBHOOK_URL_MAX = 2000
CALDAV_URL_MAX = 1000
# An HTTP entity tag as a calendar server sends it (quoted; servers keep them short).
ETAG_MAX = 255
# A password as typed (only its hash is stored): long enough for any passphrase, short enough
# that hashing it costs nothing unusual.
PASSWORD_MIN = 8
PASSWORD_MAX = 1024

# Lengths in minutes: an event type's duration and slot step, a calendar's default duration
# (the models' check constraints), and an availability query's slot length.
DURATION_MIN_MINUTES = 5
DURATION_MAX_MINUTES = 24 * 60
# Buffers around an event type's bookings, in minutes.
BUFFER_MAX_MINUTES = 24 * 60
# How far ahead a booking must be made (minutes) and may be made (days).
NOTICE_MAX_MINUTES = 365 * 24 * 60
HORIZON_MAX_DAYS = 3650
# A reminder mail, at most a week ahead.
REMINDER_MAX_MINUTES = 7 * 24 * 60
# The most moves a sub account may allow its attendees per booking (a number, not "unlimited").
ATTENDEE_MOVES_MAX = 100
# The most seats one slot of an event type may have (a webinar's size, not a stadium's).
SEATS_MAX = 1000
# Hosts of one round-robin or collective event type (and so of one booking) at most.
TEAM_HOSTS_MAX = 50
# A seat group's key (``app.scheduling.seats.seat_group``): event type id and the slot's bounds.
SEAT_GROUP_MAX = 64
