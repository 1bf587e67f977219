"""Operator commands: ``flask provision FILE`` and ``flask demo``."""

from __future__ import annotations

import json
import os
import sys

import click
from flask import Flask

from app.extensions import db
from app.services.demo import ensure_demo
from app.services.provisioning import ProvisioningInvalid, provision


@click.command("provision")
@click.argument("file", type=click.File("r", encoding="utf-8"))
def provision_command(file: click.utils.LazyFile) -> None:
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
    """Provision the demo workspace (once) and print a fresh API key."""
    access = ensure_demo()
    db.session.commit()
    port = os.environ.get("PORT", "5000")
    event_type_id = next(iter(access.event_type_ids.values()))
    click.echo(
        "\n".join(
            [
                "Demo workspace ready.",
                f"  API key (shown once): {access.api_key}",
                f"  Event types: {json.dumps(access.event_type_ids)}",
                "",
                "Try:",
                f"  curl -H 'x-calendar-api-key: {access.api_key}' "
                f"http://127.0.0.1:{port}/v1/api/calendar/bookings",
                f"  (book with POST /v1/api/calendar/event-types/{event_type_id}/bookings)",
            ]
        ),
        file=sys.stdout,
    )


def register_commands(app: Flask) -> None:
    app.cli.add_command(provision_command)
    app.cli.add_command(demo_command)
