"""Webhooks to a real HTTP receiver on loopback: subscriptions, the Standard Webhooks signature,
retries with the same webhook-id, timeouts, SSRF refusals, giving up and disabling. Attempts run
in-process here (``send_delivery``); tests/worker/test_worker_messages.py runs them in a worker."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select
from standardwebhooks import Webhook

from app.extensions import db
from app.jobs import outbox as outbox_job
from app.jobs.webhooks import send_delivery
from app.models import OutboxEvent, WebhookAttempt, WebhookDelivery, WebhookSubscription
from app.models.types import utcnow
from app.scheduling.timezones import format_utc
from app.services.integrations.outbound.addresses import UnsafeUrl, is_public, resolve_target
from app.services.integrations.webhooks import deliveries
from app.services.integrations.webhooks.deliveries import (
    HANDLER_NAME,
    due_deliveries,
    resend,
)
from tests.addresses import disguised, resolving
from tests.factories import next_monday, ny, z
from tests.webhook_receivers import webhook_receiver

MONDAY = next_monday()


@pytest.fixture
def app(make_app):
    app = make_app(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=1)
    with app.app_context():
        yield app
        db.session.remove()


def subscribed(tenants, url, events=("*",), secret=None):
    """A tenant with one webhook subscription; returns (tenant, subscription id, secret)."""
    hook = {"name": "crm", "url": url, "events": list(events)}
    if secret:
        hook["secret"] = secret
    tenant = tenants.create(webhooks=[hook])
    created = tenant.raw["agencies"][0]["subAccounts"][0]["webhooks"]["crm"]
    return tenant, created["id"], created["secret"]


def book(client, tenant, start=None):
    start = start or ny(MONDAY, 10)
    response = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": "pat@example.test"}],
        },
        headers=tenant.headers(),
    )
    assert response.status_code == 201
    return response.json


def handle_events(now=None):
    """Run the webhooks outbox handler on every event; returns the deliveries' ids."""
    now = now or utcnow()
    for event_id in db.session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id)).all():
        outbox_job.handle_event(event_id, HANDLER_NAME, now)
        db.session.commit()
    return db.session.scalars(select(WebhookDelivery.id).order_by(WebhookDelivery.id)).all()


def attempt(delivery_id, now):
    outcome = send_delivery(delivery_id, now)
    db.session.commit()
    return outcome


def delivery(delivery_id) -> WebhookDelivery:
    db.session.expire_all()
    return db.session.get(WebhookDelivery, delivery_id)


def test_provisioning_returns_the_secret_once_and_stores_it_encrypted(tenants):
    _, subscription_id, secret = subscribed(tenants, "http://127.0.0.1:9/hooks")
    assert secret.startswith("whsec_")
    stored = db.session.get(WebhookSubscription, subscription_id)
    assert secret not in stored.encrypted_secret and stored.events == ["*"]


@pytest.mark.date_sensitive
def test_a_delivery_is_signed_as_standard_webhooks_says(app, tenants):
    with webhook_receiver() as receiver:
        tenant, _, secret = subscribed(tenants, receiver.url)
        booking = book(app.test_client(), tenant)
        (delivery_id,) = handle_events()
        assert attempt(delivery_id, utcnow()).status == "succeeded"
        (request,) = receiver.requests

    payload = Webhook(secret).verify(request.body, request.headers)  # raises if it does not
    event_id = db.session.scalars(select(OutboxEvent.id)).one()
    assert request.headers["webhook-id"] == f"evt_{event_id}"
    assert payload["type"] == "booking.created" and payload["eventId"] == f"evt_{event_id}"
    shown = app.test_client().get(
        f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers()
    )
    assert payload["data"]["booking"] == shown.json  # the API's Booking, field for field
    with pytest.raises(Exception, match="signature"):
        Webhook(secret).verify(request.body.replace(b"pat@", b"eve@"), request.headers)


@pytest.mark.date_sensitive
def test_only_the_chosen_events_are_sent(app, tenants):
    with webhook_receiver():
        tenant, _, _ = subscribed(tenants, "http://127.0.0.1:9/x", events=["booking.cancelled"])
        booking = book(app.test_client(), tenant)
        assert handle_events() == []
        app.test_client().delete(
            f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers()
        )
        assert len(handle_events()) == 1


@pytest.mark.date_sensitive
def test_a_failing_receiver_gets_the_event_again_with_the_same_id(app, tenants):
    with webhook_receiver([500, 500]) as receiver:
        tenant, _, _ = subscribed(tenants, receiver.url)
        book(app.test_client(), tenant)
        (delivery_id,) = handle_events()
        now = utcnow()
        first = attempt(delivery_id, now)
        assert first.status == "pending"
        assert timedelta(seconds=23) <= first.retry_at - now <= timedelta(seconds=37)
        second = attempt(delivery_id, first.retry_at)
        assert timedelta(seconds=47) <= second.retry_at - first.retry_at <= timedelta(seconds=73)
        assert attempt(delivery_id, second.retry_at).status == "succeeded"

    event_id = db.session.scalars(select(OutboxEvent.id)).one()
    assert [r.headers["webhook-id"] for r in receiver.requests] == [f"evt_{event_id}"] * 3
    attempts = db.session.scalars(select(WebhookAttempt).order_by(WebhookAttempt.id)).all()
    assert [a.status_code for a in attempts] == [500, 500, 200]
    assert attempts[0].response_excerpt.startswith("receiver error") and (
        len(attempts[0].response_excerpt) <= 1024
    )
    assert all(a.duration_ms >= 0 for a in attempts)
    assert delivery(delivery_id).attempts == 3


@pytest.mark.date_sensitive
def test_a_receiver_that_hangs_is_cut_off_by_the_timeout(app, tenants):
    with webhook_receiver(["hang"], hang_seconds=5) as receiver:
        tenant, _, _ = subscribed(tenants, receiver.url)
        book(app.test_client(), tenant)
        (delivery_id,) = handle_events()
        outcome = attempt(delivery_id, utcnow())
    assert outcome.status == "pending"
    (recorded,) = db.session.scalars(select(WebhookAttempt)).all()
    assert recorded.status_code is None and recorded.error == "no answer within 1 s"
    assert 900 <= recorded.duration_ms < 4000


@pytest.mark.date_sensitive
def test_redirects_are_not_followed(app, tenants):
    with webhook_receiver(["redirect"]) as receiver:
        tenant, _, _ = subscribed(tenants, receiver.url)
        book(app.test_client(), tenant)
        (delivery_id,) = handle_events()
        assert attempt(delivery_id, utcnow()).status == "pending"
        assert len(receiver.requests) == 1
    assert delivery(delivery_id).last_error == "HTTP 307"


@pytest.mark.date_sensitive
def test_a_delivery_is_given_up_after_24_hours(app, tenants):
    with webhook_receiver([500] * 50) as receiver:
        tenant, _, _ = subscribed(tenants, receiver.url)
        book(app.test_client(), tenant)
        (delivery_id,) = handle_events()
        now = utcnow()
        start = delivery(delivery_id).created_at
        while (outcome := attempt(delivery_id, now)).status == "pending":
            now = outcome.retry_at
        assert outcome.status == "failed"
        assert now - start <= timedelta(hours=24)
        attempts = delivery(delivery_id).attempts
        assert 20 <= attempts <= 40  # backoff capped at an hour: about 30 in a day


@pytest.mark.date_sensitive
def test_a_subscription_failing_for_days_is_disabled(make_app, tenants):
    app = make_app(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_DISABLE_AFTER_HOURS=2)
    with app.app_context(), webhook_receiver([500] * 50) as receiver:
        tenant, subscription_id, _ = subscribed(tenants, receiver.url)
        client = app.test_client()
        book(client, tenant, ny(MONDAY, 10))
        book(client, tenant, ny(MONDAY, 11))
        first, second = handle_events()
        now = utcnow()
        while (outcome := attempt(first, now)).status == "pending":
            now = outcome.retry_at
        subscription = db.session.get(WebhookSubscription, subscription_id)
        db.session.refresh(subscription)
        assert not subscription.active and "every attempt failed" in subscription.disabled_reason
        assert delivery(second).status == "failed"  # nothing more goes to it
        listed = app.test_cli_runner().invoke(args=["webhooks", "list"])
        assert json.loads(listed.output)["disabledAt"] is not None
        enabled = app.test_cli_runner().invoke(args=["webhooks", "enable", str(subscription_id)])
        assert json.loads(enabled.output)["active"] is True


@pytest.mark.date_sensitive
def test_a_resend_sends_the_same_event_again(app, tenants):
    with webhook_receiver() as receiver:
        tenant, _, _ = subscribed(tenants, receiver.url)
        book(app.test_client(), tenant)
        (delivery_id,) = handle_events()
        attempt(delivery_id, utcnow())
        resend(delivery_id, utcnow())
        db.session.commit()
        assert attempt(delivery_id, utcnow()).status == "succeeded"
    first, again = receiver.requests
    assert first.headers["webhook-id"] == again.headers["webhook-id"]
    assert first.body == again.body


@pytest.mark.date_sensitive
def test_an_overdue_attempt_is_handed_over_again_once(app, tenants):
    """A worker died in the middle of it: after the lease the sweep claims it, once."""
    with webhook_receiver():
        tenant, _, _ = subscribed(tenants, "http://127.0.0.1:9/x")
        book(app.test_client(), tenant)
        (delivery_id,) = handle_events()
    planned = delivery(delivery_id).next_attempt_at
    assert due_deliveries(planned + timedelta(minutes=4)) == []  # still within the lease
    later = planned + timedelta(minutes=6)
    assert due_deliveries(later) == [delivery_id]
    db.session.commit()
    assert due_deliveries(later + timedelta(minutes=1)) == []  # claimed


# Where webhooks may go


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.5.4",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "224.0.0.1",
    ],
)
def test_private_and_special_addresses_are_not_public(address):
    assert not is_public(address)


def test_public_addresses_are_public():
    assert is_public("93.184.216.34") and is_public("2606:4700:4700::1111")


def test_a_private_address_is_refused_when_protection_is_on():
    with pytest.raises(UnsafeUrl, match="not a public address"):
        resolve_target("http://localhost:8080/hooks", require_https=False, allow_private=False)
    with pytest.raises(UnsafeUrl, match=r"169\.254\.169\.254"):
        resolve_target("http://169.254.169.254/latest", require_https=False, allow_private=False)


def test_only_https_in_production():
    with pytest.raises(UnsafeUrl, match="https://"):
        resolve_target("http://127.0.0.1/hooks", require_https=True, allow_private=True)
    with pytest.raises(UnsafeUrl, match="credentials"):
        resolve_target("https://u:p@127.0.0.1/", require_https=True, allow_private=True)


def add_with_cli(app, sub_account_id: int, url: str):
    """``flask webhooks add`` for every event, as an operator types it."""
    args = ["webhooks", "add", str(sub_account_id), "--name", "x", "--url", url, "--event", "*"]
    return app.test_cli_runner().invoke(args=args)


def test_saving_a_private_url_is_refused_without_the_operator_setting(make_app, tenants):
    app = make_app(WEBHOOK_ALLOW_PRIVATE=False)
    with app.app_context():
        result = add_with_cli(app, tenants.create().sub_account_id, "http://127.0.0.1:8080/")
    assert result.exit_code == 1 and "not a public address" in result.output


@pytest.mark.date_sensitive
def test_a_url_that_turns_private_is_refused_at_send_time(make_app, tenants):
    """Saved while allowed (or resolving elsewhere), refused when it is sent."""
    with webhook_receiver() as receiver:
        allowing = make_app(WEBHOOK_ALLOW_PRIVATE=True)
        with allowing.app_context():
            tenant, _, _ = subscribed(tenants, receiver.url)
            book(allowing.test_client(), tenant)
            (delivery_id,) = handle_events()
        strict = make_app(WEBHOOK_ALLOW_PRIVATE=False)
        with strict.app_context():
            attempt(delivery_id, utcnow())
            assert "refused:" in delivery(delivery_id).last_error
        assert receiver.requests == []


@disguised
def test_saving_a_url_spelling_a_private_address_is_refused(make_app, tenants, address):
    strict = make_app(WEBHOOK_ALLOW_PRIVATE=False)
    with strict.app_context():
        result = add_with_cli(strict, tenants.create().sub_account_id, f"http://[{address}]:8080/")
        assert result.exit_code == 1 and "not a public address" in result.output
        assert db.session.scalar(select(WebhookSubscription.id)) is None


def test_the_refusal_names_webhook_allow_private(make_app, tenants):
    strict = make_app(WEBHOOK_ALLOW_PRIVATE=False)
    with strict.app_context():
        result = add_with_cli(strict, tenants.create().sub_account_id, "http://localhost:8080/")
    assert result.exit_code == 1
    assert "set WEBHOOK_ALLOW_PRIVATE=1 to allow private targets" in result.output


@pytest.mark.date_sensitive
@pytest.mark.parametrize("address", ["::7f00:1", "::ffff:0:7f00:1", "64:ff9b::7f00:1"])
def test_a_name_that_turns_into_a_disguised_address_is_refused_at_send_time(
    make_app, tenants, monkeypatch, address
):
    """Saved while it resolved to loopback (allowed); sent once DNS answers a disguise."""
    answers = {"hooks.example.test": ["127.0.0.1"]}
    resolving(monkeypatch, answers)
    sent = []
    monkeypatch.setattr(deliveries, "post", lambda target, *args: sent.append(target))
    allowing = make_app(WEBHOOK_ALLOW_PRIVATE=True)
    with allowing.app_context():
        tenant, _, _ = subscribed(tenants, "http://hooks.example.test:9/hooks")
        book(allowing.test_client(), tenant)
        (delivery_id,) = handle_events()
    answers["hooks.example.test"] = [address]
    strict = make_app(WEBHOOK_ALLOW_PRIVATE=False)
    with strict.app_context():
        attempt(delivery_id, utcnow())
        last_error = delivery(delivery_id).last_error
    assert last_error.startswith(f"refused: hooks.example.test resolves to {address}")
    assert sent == []


def test_the_cli_adds_lists_and_removes_subscriptions(app, tenants):
    runner = app.test_cli_runner()
    sub_account_id = tenants.create().sub_account_id
    added = runner.invoke(
        args=[
            "webhooks",
            "add",
            str(sub_account_id),
            "--name",
            "zap",
            "--url",
            "http://127.0.0.1:9/hook",
            "--event",
            "booking.created",
            "--event",
            "booking.cancelled",
        ]
    )
    assert added.exit_code == 0, added.output
    created = json.loads(added.output)
    assert created["secret"].startswith("whsec_")
    listed = runner.invoke(args=["webhooks", "list", "--sub-account", str(sub_account_id)])
    (shown,) = [json.loads(line) for line in listed.output.splitlines()]
    assert shown["events"] == ["booking.cancelled", "booking.created"] and "secret" not in shown
    deliveries = runner.invoke(args=["webhooks", "deliveries", str(created["id"])])
    assert deliveries.exit_code == 0 and deliveries.output == ""
    removed = runner.invoke(args=["webhooks", "remove", str(created["id"])])
    assert json.loads(removed.output) == {"removed": created["id"]}


@pytest.mark.date_sensitive
def test_the_cli_prints_subscriptions_and_deliveries_field_by_field_in_order(app, tenants):
    """``webhooks add``, ``list`` and ``deliveries``, line for line: the keys in their order,
    an instant as ``…Z`` or null, the secret only when it is made."""
    runner = app.test_cli_runner()
    tenant = tenants.create()
    sub_account_id = tenant.sub_account_id
    url = "http://127.0.0.1:9/hook"  # nothing listens: the attempt fails
    arguments = ["--name", "crm", "--url", url, "--event", "*"]
    added = runner.invoke(args=["webhooks", "add", str(sub_account_id), *arguments]).output
    subscription = db.session.scalars(select(WebhookSubscription)).one()
    shown = {
        "id": subscription.id,
        "subAccountId": sub_account_id,
        "name": "crm",
        "url": url,
        "events": ["*"],
        "active": True,
        "failingSince": None,
        "disabledAt": None,
        "disabledReason": None,
        "createdAt": format_utc(subscription.created_at),
    }
    assert added == json.dumps({**shown, "secret": json.loads(added)["secret"]}) + "\n"
    assert runner.invoke(args=["webhooks", "list"]).output == json.dumps(shown) + "\n"

    book(app.test_client(), tenant)
    (delivery_id,) = handle_events()
    attempt(delivery_id, utcnow())
    sent, tried = delivery(delivery_id), db.session.scalars(select(WebhookAttempt)).one()
    logged = {
        "id": delivery_id,
        "subscriptionId": subscription.id,
        "webhookId": f"evt_{sent.event_id}",
        "status": str(sent.status),
        "attempts": 1,
        "nextAttemptAt": utc_or_null(sent.next_attempt_at),
        "lastStatusCode": None,
        "lastError": sent.last_error,
        "createdAt": format_utc(sent.created_at),
        "finishedAt": utc_or_null(sent.finished_at),
        "attemptLog": [
            {
                "at": format_utc(tried.attempted_at),
                "statusCode": None,
                "durationMs": tried.duration_ms,
                "response": None,
                "error": tried.error,
            }
        ],
    }
    printed = runner.invoke(args=["webhooks", "deliveries", str(subscription.id)]).output
    assert printed == json.dumps(logged) + "\n"


def utc_or_null(instant):
    return None if instant is None else format_utc(instant)
