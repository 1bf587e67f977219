"""What the operator commands print of a calendar connection, a webhook subscription and a
webhook delivery: one JSON object each, its keys in the order declared here. An instant is
UTC ISO 8601 with a trailing ``Z`` (``app.representations.UTCTimestamp``, the API's), or null.
A secret is never among them: a password or a signing secret is no field here (``flask
webhooks add`` prints the new secret beside the subscription, that once)."""

from __future__ import annotations

from marshmallow import Schema, fields

from app.representations import UTCTimestamp


class ConnectionSchema(Schema):
    """A ``CalendarConnection`` with its sync health: ``flask connections list`` and ``add``."""

    id = fields.Integer()
    subAccountId = fields.Integer(attribute="sub_account_id")
    name = fields.String()
    kind = fields.String()
    url = fields.String()
    username = fields.String()
    calendar = fields.String()
    writeBack = fields.Boolean(attribute="write_back")
    active = fields.Boolean()
    lastAttemptAt = UTCTimestamp(attribute="last_attempt_at")
    lastSuccessAt = UTCTimestamp(attribute="last_success_at")
    lastError = fields.String(attribute="last_error")
    lastErrorAt = UTCTimestamp(attribute="last_error_at")
    busyCount = fields.Integer(attribute="busy_count")
    skippedEvents = fields.Integer(attribute="skipped_count")
    skippedReason = fields.String(attribute="skipped_reason")
    consecutiveFailures = fields.Integer(attribute="consecutive_failures")
    lastWriteAt = UTCTimestamp(attribute="last_write_at")
    lastWriteError = fields.String(attribute="last_write_error")
    lastWriteErrorAt = UTCTimestamp(attribute="last_write_error_at")
    writingExistingBookings = fields.Boolean(attribute="write_existing_pending")
    needsAction = fields.String(attribute="needs_action")  # what a person must do, in words
    actionMailedAt = UTCTimestamp(attribute="action_mailed_at")


class SubscriptionSchema(Schema):
    """A ``WebhookSubscription``: ``flask webhooks list``, ``add`` and ``enable``."""

    id = fields.Integer()
    subAccountId = fields.Integer(attribute="sub_account_id")
    name = fields.String()
    url = fields.String()
    events = fields.List(fields.String())
    active = fields.Boolean()
    failingSince = UTCTimestamp(attribute="failing_since")
    disabledAt = UTCTimestamp(attribute="disabled_at")
    disabledReason = fields.String(attribute="disabled_reason")
    createdAt = UTCTimestamp(attribute="created_at")


class AttemptSchema(Schema):
    """One ``WebhookAttempt`` of a delivery."""

    at = UTCTimestamp(attribute="attempted_at")
    statusCode = fields.Integer(attribute="status_code")
    durationMs = fields.Integer(attribute="duration_ms")
    response = fields.String(attribute="response_excerpt")
    error = fields.String()


class DeliverySchema(Schema):
    """A delivery of the log, with its attempts oldest first
    (``app.services.integrations.webhooks.deliveries.DeliveryRecord``): ``flask webhooks
    deliveries``."""

    id = fields.Integer(attribute="delivery.id")
    subscriptionId = fields.Integer(attribute="delivery.subscription_id")
    webhookId = fields.Function(lambda record: f"evt_{record.delivery.event_id}")
    status = fields.String(attribute="delivery.status")
    attempts = fields.Integer(attribute="delivery.attempts")
    nextAttemptAt = UTCTimestamp(attribute="delivery.next_attempt_at")
    lastStatusCode = fields.Integer(attribute="delivery.last_status_code")
    lastError = fields.String(attribute="delivery.last_error")
    createdAt = UTCTimestamp(attribute="delivery.created_at")
    finishedAt = UTCTimestamp(attribute="delivery.finished_at")
    attemptLog = fields.List(fields.Nested(AttemptSchema), attribute="attempts")


CONNECTION = ConnectionSchema()
SUBSCRIPTION = SubscriptionSchema()
DELIVERY = DeliverySchema()
