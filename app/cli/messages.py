"""Operator commands for what the service tells others: ``flask webhooks …`` (subscriptions,
their deliveries, re-sending) and ``flask outbox`` (the mail kept or sent)."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup
from sqlalchemy import select

from app.cli.schemas import DELIVERY, SUBSCRIPTION
from app.extensions import db
from app.models import MailMessage, MailStatus
from app.models.types import utcnow
from app.scheduling.timezones import format_utc
from app.services.common.errors import ServiceError
from app.services.integrations.webhooks.deliveries import delivery_log, enqueue_attempt, resend
from app.services.integrations.webhooks.subscriptions import (
    EVENT_NAMES,
    add_subscription,
    enable_subscription,
    get_subscription,
    list_subscriptions,
    remove_subscription,
)

webhooks_group = AppGroup(
    "webhooks", help="Webhook subscriptions: list, add, remove, enable, deliveries, resend."
)


def service_failure(error: ServiceError) -> click.ClickException:
    """A service's refusal as the command's error: its message, then each field's problems."""
    lines = [f"  {path}: {' '.join(msgs)}" for path, msgs in (error.errors or {}).items()]
    return click.ClickException("\n".join([error.message, *lines]) if lines else error.message)


@webhooks_group.command("list")
@click.option("--sub-account", "sub_account_id", type=int, help="Only this sub account's.")
def webhooks_list(sub_account_id: int | None) -> None:
    """One JSON line per subscription (never its secret)."""
    for subscription in list_subscriptions(sub_account_id):
        click.echo(json.dumps(SUBSCRIPTION.dump(subscription)))


@webhooks_group.command("add")
@click.argument("sub_account_id", type=int)
@click.option("--name", required=True)
@click.option("--url", required=True, help="Where to POST (https; http outside production).")
@click.option(
    "--event",
    "events",
    multiple=True,
    required=True,
    help=f"An event to send (repeatable), or '*' for all: {', '.join(EVENT_NAMES)}.",
)
@click.option("--secret", help="A signing secret (whsec_…); generated when not given.")
def webhooks_add(
    sub_account_id: int, name: str, url: str, events: tuple[str, ...], secret: str | None
) -> None:
    """Subscribe URL to SUB_ACCOUNT_ID's booking events; prints the secret, this once."""
    document = {"name": name, "url": url, "events": list(events), "secret": secret}
    try:
        subscription, plain = add_subscription(sub_account_id, document)
        db.session.commit()
    except ServiceError as err:
        db.session.rollback()
        raise service_failure(err) from None
    click.echo(json.dumps({**SUBSCRIPTION.dump(subscription), "secret": plain}))


@webhooks_group.command("remove")
@click.argument("subscription_id", type=int)
def webhooks_remove(subscription_id: int) -> None:
    """Delete a subscription and its delivery history."""
    try:
        remove_subscription(subscription_id)
        db.session.commit()
    except ServiceError as err:
        db.session.rollback()
        raise service_failure(err) from None
    click.echo(json.dumps({"removed": subscription_id}))


@webhooks_group.command("enable")
@click.argument("subscription_id", type=int)
def webhooks_enable(subscription_id: int) -> None:
    """Turn a subscription that was disabled for failing back on."""
    try:
        subscription = enable_subscription(subscription_id)
        db.session.commit()
    except ServiceError as err:
        db.session.rollback()
        raise service_failure(err) from None
    click.echo(json.dumps(SUBSCRIPTION.dump(subscription)))


@webhooks_group.command("deliveries")
@click.argument("subscription_id", type=int)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
def webhooks_deliveries(subscription_id: int, limit: int) -> None:
    """The subscription's latest deliveries, one JSON line each, with every attempt."""
    try:
        get_subscription(subscription_id)
    except ServiceError as err:
        raise service_failure(err) from None
    for record in delivery_log(subscription_id, limit):
        click.echo(json.dumps(DELIVERY.dump(record)))


@webhooks_group.command("resend")
@click.argument("delivery_id", type=int)
def webhooks_resend(delivery_id: int) -> None:
    """Send a delivery again (same webhook-id) through the worker."""
    now = utcnow()
    try:
        delivery = resend(delivery_id, now)
        db.session.commit()
    except ServiceError as err:
        db.session.rollback()
        raise service_failure(err) from None
    enqueue_attempt(delivery.id, now)
    click.echo(json.dumps({"resent": delivery.id, "webhookId": f"evt_{delivery.event_id}"}))


@click.command("outbox")
@click.option("--all", "everything", is_flag=True, help="Sent mail too, not only mail kept.")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--show", "message_id", type=int, help="Print one message in full.")
def outbox_command(everything: bool, limit: int, message_id: int | None) -> None:
    """The mail the service kept (no SMTP_URL set), newest first, one JSON line each."""
    if message_id is not None:
        message = db.session.get(MailMessage, message_id)
        if message is None:
            raise click.ClickException("Mail message not found")
        click.echo(f"To: {message.recipient}\nSubject: {message.subject}\n\n{message.text_body}")
        if message.ics:
            click.echo(message.ics)
        return
    stmt = select(MailMessage).order_by(MailMessage.id.desc()).limit(limit)
    if not everything:
        stmt = stmt.where(MailMessage.status == MailStatus.KEPT)
    for message in db.session.scalars(stmt):
        click.echo(
            json.dumps(
                {
                    "id": message.id,
                    "createdAt": format_utc(message.created_at),
                    "status": message.status,
                    "kind": message.kind,
                    "subAccountId": message.sub_account_id,
                    "bookingId": message.booking_id,
                    "recipient": message.recipient,
                    "subject": message.subject,
                }
            )
        )
