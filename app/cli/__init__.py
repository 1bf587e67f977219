"""Operator commands: ``flask provision FILE``, ``flask demo``, ``flask connections …`` and
``flask secrets reencrypt`` (``app.cli.messages``: ``flask webhooks …`` and ``flask outbox``)."""

from __future__ import annotations

import json
import sys
from typing import IO

import click
from flask import Flask
from flask.cli import AppGroup

from app.cli.messages import outbox_command, service_failure, webhooks_group
from app.cli.schemas import CONNECTION
from app.config import settings
from app.extensions import db
from app.jobs.calendars import sync_all_connections
from app.models.types import utcnow
from app.services.accounts.demo import ensure_demo
from app.services.accounts.provisioning import ProvisioningInvalid, provision
from app.services.common.errors import ServiceError
from app.services.common.reencryption import reencrypt_stored_secrets
from app.services.integrations.calendars.connections import (
    add_connection,
    get_connection,
    list_connections,
    remove_connection,
)
from app.services.integrations.calendars.sync import probe_connection, sync_connection


@click.command("provision")
@click.argument("file", type=click.File("r", encoding="utf-8"))
def provision_command(file: IO[str]) -> None:
    """Create agencies, sub accounts, calendars and API keys from a JSON document.

    FILE is a path, or - for standard input. Prints the created ids and the plain-text API
    keys as JSON; they are shown only this once. Nothing is written unless all of it is valid.
    """
    try:
        document = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise click.ClickException(f"FILE is not valid JSON: {err}") from None
    try:
        created = provision(document)
        db.session.commit()
    except ProvisioningInvalid as err:
        db.session.rollback()
        lines = [f"  {path}: {' '.join(msgs)}" for path, msgs in (err.errors or {}).items()]
        raise click.ClickException(
            "\n".join(["invalid provisioning document", *lines]) if lines else err.message
        ) from None
    click.echo(json.dumps(created, indent=2))


@click.command("demo")
def demo_command() -> None:
    """Provision the demo workspace (once); print a fresh dashboard password and API key."""
    access = ensure_demo()
    db.session.commit()
    base = settings().base_url
    event_type_id = next(iter(access.event_type_ids.values()))
    click.echo(
        "\n".join(
            [
                "Demo workspace ready.",
                f"  Dashboard: {base}/login",
                f"    email: {access.email}",
                f"    password (shown once): {access.password}",
                f"  API key (shown once): {access.api_key}",
                "  (Every start sets a new demo password and key: a password changed in the"
                " dashboard is replaced, and earlier demo keys stop working.)",
                f"  Event types: {json.dumps(access.event_type_ids)}",
                "",
                "Try:",
                f"  curl -H 'x-calendar-api-key: {access.api_key}' {base}/v1/api/calendar/bookings",
                f"  (book with POST /v1/api/calendar/event-types/{event_type_id}/bookings)",
            ]
        ),
        file=sys.stdout,
    )


connections_group = AppGroup(
    "connections", help="CalDAV calendar connections: list, add, test, sync, remove."
)


@connections_group.command("list")
@click.option("--sub-account", "sub_account_id", type=int, help="Only this sub account's.")
def connections_list(sub_account_id: int | None) -> None:
    """One JSON line per connection, with its sync health (never its password)."""
    for connection in list_connections(sub_account_id):
        click.echo(json.dumps(CONNECTION.dump(connection)))


@connections_group.command("add")
@click.argument("sub_account_id", type=int)
@click.option("--name", required=True)
@click.option(
    "--kind",
    type=click.Choice(["caldav", "ics"]),
    default="caldav",
    show_default=True,
    help="A CalDAV calendar, or a calendar feed (read-only; its address is all it takes).",
)
@click.option("--url", required=True, help="The CalDAV server or principal URL, or the feed's.")
@click.option("--username", help="CalDAV only.")
@click.option("--password", help="CalDAV only; asked for when not given.")
@click.option("--calendar", help="The calendar's URL or display name (if the account has several).")
@click.option("--write-back/--no-write-back", default=True, help="Write bookings into it.")
def connections_add(sub_account_id: int, **fields: str | bool | None) -> None:
    """Connect a CalDAV calendar or subscribe to a calendar feed for SUB_ACCOUNT_ID (a password
    is stored encrypted)."""
    if fields["kind"] == "ics":
        document = {"name": fields["name"], "kind": "ics", "url": fields["url"]}
    else:
        password = fields["password"] or click.prompt("Password", hide_input=True)
        document = {
            "name": fields["name"],
            "url": fields["url"],
            "username": fields["username"],
            "password": password,
            "calendar": fields["calendar"],
            "writeBack": fields["write_back"],
        }
    try:
        connection = add_connection(sub_account_id, document)
        db.session.commit()
    except ServiceError as err:
        db.session.rollback()
        raise service_failure(err) from None
    click.echo(json.dumps(CONNECTION.dump(connection)))


@connections_group.command("test")
@click.argument("connection_id", type=int)
def connections_test(connection_id: int) -> None:
    """Reach the calendar and read its events now, storing nothing."""
    try:
        get_connection(connection_id)
    except ServiceError as err:
        raise service_failure(err) from None
    result = probe_connection(connection_id, now=utcnow())
    click.echo(json.dumps(result.as_dict()))
    if result.status != "probed":
        raise SystemExit(1)


@connections_group.command("sync")
@click.argument("connection_id", type=int, required=False)
@click.option("--all", "sync_all", is_flag=True, help="Every active connection.")
def connections_sync(connection_id: int | None, sync_all: bool) -> None:
    """Sync a connection (or --all) now, in this process; one JSON line per connection."""
    if sync_all == (connection_id is not None):
        raise click.UsageError("give a CONNECTION_ID or --all")
    if sync_all:
        results = sync_all_connections(utcnow())
    else:
        assert connection_id is not None  # the usage check above: an id, or --all
        try:
            get_connection(connection_id)
        except ServiceError as err:
            raise service_failure(err) from None
        results = [sync_connection(connection_id, now=utcnow())]
        db.session.commit()
    for result in results:
        click.echo(json.dumps(result.as_dict()))
    if not all(result.ok for result in results):
        raise SystemExit(1)


@connections_group.command("remove")
@click.argument("connection_id", type=int)
def connections_remove(connection_id: int) -> None:
    """Delete a connection and the busy time it brought."""
    try:
        remove_connection(connection_id)
        db.session.commit()
    except ServiceError as err:
        db.session.rollback()
        raise service_failure(err) from None
    click.echo(json.dumps({"removed": connection_id}))


secrets_group = AppGroup("secrets", help="Stored secrets: reencrypt after a SECRET_KEY rotation.")


@secrets_group.command("reencrypt")
def secrets_reencrypt() -> None:
    """Re-encrypt every stored calendar password and webhook secret with the current
    SECRET_KEY, reading them with it or any key in SECRET_KEY_FALLBACKS. Prints the counts;
    exits 1 if a secret none of the keys can read was left as it was."""
    outcome = reencrypt_stored_secrets(settings().secret_keys)
    db.session.commit()
    click.echo(json.dumps(outcome.as_dict()))
    if any(outcome.unreadable.values()):
        raise SystemExit(1)


def register_commands(app: Flask) -> None:
    app.cli.add_command(provision_command)
    app.cli.add_command(demo_command)
    app.cli.add_command(connections_group)
    app.cli.add_command(webhooks_group)
    app.cli.add_command(outbox_command)
    app.cli.add_command(secrets_group)
