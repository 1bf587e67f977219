"""The notifications page: the mail outbox of the embedded default (no SMTP server, so mail is
kept) and the sub account's webhook subscriptions, with a real HTTP receiver on loopback for
the delivery log and re-sending."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.jobs import outbox as outbox_job
from app.jobs.webhooks import send_delivery
from app.models import (
    MailMessage,
    OutboxEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookSubscription,
)
from app.models.types import utcnow
from app.services.integrations.notifications import booking_mail
from app.services.integrations.webhooks import deliveries
from app.services.integrations.webhooks.subscriptions import add_subscription
from tests.dashboard_users import hidden_fields, owner_email, sign_in
from tests.factories import book_through_api, make_sub_account, next_monday, ny
from tests.webhook_receivers import webhook_receiver

MONDAY = next_monday()

_SECRET = re.compile(r'value="(whsec_[A-Za-z0-9+/=]+)"')


@pytest.fixture
def app(make_app):
    """Mail kept, not sent (no SMTP server); webhooks may go to the loopback receiver."""
    app = make_app(SMTP_URL=None, WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=1)
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def owner(client, tenant):
    sign_in(client, owner_email(tenant))


def page_of(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/notifications"


def add_webhook(client, tenant, url, events=("*",), name="crm", fields=None):
    data = {**(fields or hidden_fields(client, page_of(tenant)))}
    data.update(name=name, url=url, events=list(events))
    return client.post(f"{page_of(tenant)}/webhooks", data=data)


def post_button(client, tenant, path):
    token = hidden_fields(client, page_of(tenant))["csrf_token"]
    return client.post(path, data={"csrf_token": token})


def book(client, tenant, attendee_name="Pat Doe"):
    attendees = [{"email": "pat@example.test", "name": attendee_name}]
    response = book_through_api(
        client, tenant, ny(MONDAY, 10), title="Cleaning", attendees=attendees
    )
    assert response.status_code == 201, response.json
    return response.json


def run_handler(handler: str) -> None:
    """Run an outbox handler on every event, as the worker would."""
    now = utcnow()
    for event_id in db.session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id)).all():
        outbox_job.handle_event(event_id, handler, now)
        db.session.commit()


def kept_mail(sub_account_id: int, n: int) -> MailMessage:
    message = MailMessage(
        dedupe_key=f"test:{sub_account_id}:{n}",
        sub_account_id=sub_account_id,
        kind="booking.created",
        recipient=f"person{n}@example.test",
        subject=f"Message number {n:03d}",
        message_id=f"<{n}@service.test>",
        text_body="Hello",
        html_body="<p>Hello</p>",
        status="kept",
        created_at=utcnow() - timedelta(minutes=100 - n),
    )
    db.session.add(message)
    db.session.commit()
    return message


def subscription_named(name: str) -> WebhookSubscription | None:
    db.session.expire_all()
    return db.session.scalar(select(WebhookSubscription).where(WebhookSubscription.name == name))


# The email outbox


@pytest.mark.date_sensitive
def test_the_outbox_lists_the_mail_a_booking_produced(client, tenant, owner):
    book(client, tenant)
    run_handler(booking_mail.HANDLER_NAME)
    page = client.get(page_of(tenant)).get_data(as_text=True)
    assert "pat@example.test" in page and "Booked: Cleaning" in page
    assert ">kept</span>" in page


def test_the_outbox_shows_the_newest_first_a_page_at_a_time(client, tenant, owner):
    for n in range(30):
        kept_mail(tenant.sub_account_id, n)
    first = client.get(page_of(tenant)).get_data(as_text=True)
    assert "30 messages" in first and "Page 1 of 2" in first
    assert first.index("Message number 029") < first.index("Message number 028")
    assert "Message number 004" not in first
    second = client.get(page_of(tenant), query_string={"page": 2}).get_data(as_text=True)
    assert "Message number 004" in second and "Message number 005" not in second


@pytest.mark.parametrize("page", ["abc", "0", "-3", str(10**30)])
def test_a_page_number_that_is_no_page_shows_the_first(client, tenant, owner, page):
    kept_mail(tenant.sub_account_id, 1)
    response = client.get(page_of(tenant), query_string={"page": page})
    assert response.status_code == 200 and "Page 1 of 1" in response.get_data(as_text=True)


@pytest.mark.date_sensitive
def test_a_message_page_shows_its_headers_and_escaped_text(client, tenant, owner):
    book(client, tenant, attendee_name="<i>Pat</i>")
    run_handler(booking_mail.HANDLER_NAME)
    message = db.session.scalar(
        select(MailMessage).where(MailMessage.recipient == "pat@example.test")
    )
    response = client.get(f"{page_of(tenant)}/mail/{message.id}")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "<dt>To</dt><dd>pat@example.test</dd>" in page
    assert message.message_id.replace("<", "&lt;").replace(">", "&gt;") in page
    assert "Your booking is made." in page
    assert "&lt;i&gt;Pat&lt;/i&gt;" in page and "<i>Pat</i>" not in page


def test_another_sub_accounts_message_is_not_found(client, tenant, owner):
    theirs = kept_mail(make_sub_account(tenant, timezone="Europe/Berlin").id, 1)
    assert client.get(f"{page_of(tenant)}/mail/{theirs.id}").status_code == 404
    assert "Message number 001" not in client.get(page_of(tenant)).get_data(as_text=True)
    assert client.get(f"{page_of(tenant)}/mail/{10**30}").status_code == 404


# Webhooks


def test_adding_a_webhook_shows_its_secret_once(client, tenant, owner):
    fields = hidden_fields(client, page_of(tenant))
    added = add_webhook(
        client, tenant, "http://127.0.0.1:9/hooks", ["booking.created"], fields=fields
    )
    assert added.status_code == 200 and added.headers["Cache-Control"] == "no-store"
    secret = _SECRET.search(added.get_data(as_text=True)).group(1)
    stored = subscription_named("crm")
    assert stored.events == ["booking.created"] and secret not in stored.encrypted_secret
    listed = client.get(page_of(tenant)).get_data(as_text=True)
    assert "http://127.0.0.1:9/hooks" in listed and "whsec_" not in listed
    again = add_webhook(client, tenant, "http://127.0.0.1:9/hooks", fields=fields)  # a reload
    assert again.status_code == 303 and "whsec_" not in again.get_data(as_text=True)
    assert db.session.scalar(select(func.count()).select_from(WebhookSubscription)) == 1


def test_a_private_webhook_url_is_refused_next_to_its_field(make_app, tenant):
    strict = make_app(WEBHOOK_ALLOW_PRIVATE=False)
    with strict.app_context():
        client = strict.test_client()
        sign_in(client, owner_email(tenant))
        refused = add_webhook(client, tenant, "http://127.0.0.1:8080/hooks")
        page = refused.get_data(as_text=True)
        assert refused.status_code == 200
        assert re.search(r'id="url-errors">[^<]*which is not a public address', page)
        assert subscription_named("crm") is None


@pytest.mark.parametrize(
    ("url", "events", "message"),
    [
        ("ftp://example.test/hooks", ["*"], "the URL must start with"),
        ("", ["*"], "the URL must start with"),
        ("https://user:pw@example.test/", ["*"], "must not hold credentials"),
        ("http://127.0.0.1:9/" + "x" * 10_000, ["*"], "Longer than maximum length 2000."),
        ("http://127.0.0.1:9/hooks", [], "Shorter than minimum length 1."),
        ("http://127.0.0.1:9/hooks", ["booking.exploded"], "Must be one of"),
    ],
)
def test_a_bad_webhook_is_refused_in_words_not_a_500(client, tenant, owner, url, events, message):
    refused = add_webhook(client, tenant, url, events)
    assert refused.status_code == 200 and message in refused.get_data(as_text=True)
    assert subscription_named("crm") is None


@pytest.mark.date_sensitive
def test_the_delivery_log_shows_attempts_and_a_resend_sends_again(client, tenant, owner):
    with webhook_receiver([500]) as receiver:
        add_webhook(client, tenant, receiver.url)
        hook = subscription_named("crm")
        book(client, tenant)
        run_handler(deliveries.HANDLER_NAME)
        (delivery_id,) = db.session.scalars(select(WebhookDelivery.id)).all()
        send_delivery(delivery_id, utcnow())  # answered 500
        db.session.commit()
        hook_page = f"{page_of(tenant)}/webhooks/{hook.id}"
        log = client.get(hook_page).get_data(as_text=True)
        assert "booking.created" in log and "HTTP 500" in log and " ms" in log
        assert ">pending</span>" in log

        resent = post_button(client, tenant, f"{hook_page}/deliveries/{delivery_id}/resend")
        assert resent.status_code == 302
        send_delivery(delivery_id, utcnow())  # what the worker does next
        db.session.commit()
        first, again = receiver.wait_for(2)

    assert first.headers["webhook-id"] == again.headers["webhook-id"]
    log = client.get(hook_page).get_data(as_text=True)
    assert "HTTP 500" in log and "HTTP 200" in log and ">succeeded</span>" in log
    assert db.session.scalar(select(func.count()).select_from(WebhookAttempt)) == 2


def test_a_disabled_subscription_is_shown_so_and_can_be_enabled(client, tenant, owner):
    subscription, _ = add_subscription(
        tenant.sub_account_id, {"name": "crm", "url": "http://127.0.0.1:9/", "events": ["*"]}
    )
    subscription.active, subscription.disabled_at = False, utcnow()
    subscription.disabled_reason = "every attempt failed"
    db.session.commit()
    hook_page = f"{page_of(tenant)}/webhooks/{subscription.id}"
    assert ">disabled</span>" in client.get(page_of(tenant)).get_data(as_text=True)
    assert "every attempt failed" in client.get(hook_page).get_data(as_text=True)
    assert post_button(client, tenant, f"{hook_page}/enable").status_code == 302
    enabled = subscription_named("crm")
    assert enabled.active and enabled.disabled_at is None


def test_removing_a_subscription_deletes_it(client, tenant, owner):
    add_webhook(client, tenant, "http://127.0.0.1:9/hooks")
    hook_page = f"{page_of(tenant)}/webhooks/{subscription_named('crm').id}"
    removed = post_button(client, tenant, f"{hook_page}/remove")
    assert removed.status_code == 302 and removed.headers["Location"] == page_of(tenant)
    assert subscription_named("crm") is None


def test_a_remove_without_its_csrf_token_changes_nothing(client, tenant, owner):
    add_webhook(client, tenant, "http://127.0.0.1:9/hooks")
    client.post(f"{page_of(tenant)}/webhooks/{subscription_named('crm').id}/remove")
    assert subscription_named("crm") is not None


def test_another_sub_accounts_subscription_is_not_found(client, tenant, owner):
    other = make_sub_account(tenant, timezone="Europe/Berlin")
    theirs, _ = add_subscription(
        other.id, {"name": "theirs", "url": "http://127.0.0.1:9/", "events": ["*"]}
    )
    db.session.commit()
    hook_page = f"{page_of(tenant)}/webhooks/{theirs.id}"
    assert client.get(hook_page).status_code == 404
    assert post_button(client, tenant, f"{hook_page}/enable").status_code == 404
    assert post_button(client, tenant, f"{hook_page}/remove").status_code == 404
    assert subscription_named("theirs") is not None
    assert client.get(f"{page_of(tenant)}/webhooks/{10**30}").status_code == 404


@pytest.mark.date_sensitive
def test_another_subscriptions_delivery_is_not_resent(client, tenant, owner):
    add_webhook(client, tenant, "http://127.0.0.1:9/a", name="a")
    add_webhook(client, tenant, "http://127.0.0.1:9/b", name="b")
    book(client, tenant)
    run_handler(deliveries.HANDLER_NAME)
    b = subscription_named("b")
    (of_b,) = db.session.scalars(
        select(WebhookDelivery.id).where(WebhookDelivery.subscription_id == b.id)
    ).all()
    a_page = f"{page_of(tenant)}/webhooks/{subscription_named('a').id}"
    assert post_button(client, tenant, f"{a_page}/deliveries/{of_b}/resend").status_code == 404
