"""Absolute links the service writes (invitations, password resets, links in mail, OAuth
redirect URIs): built from ``PUBLIC_URL``, never from the request.

A request's ``Host`` header is the client's to choose; a link built from it could send an
invited person's one-time token to any host an attacker names.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import current_app

from app.config import settings


def public_link(endpoint: str, **values: Any) -> str:
    """The absolute URL of ``endpoint`` with ``values``, under ``PUBLIC_URL`` (its path, if
    it has one, prefixes the route's)."""
    base = urlsplit(settings().base_url)
    adapter = current_app.url_map.bind(
        base.netloc, script_name=base.path or "/", url_scheme=base.scheme
    )
    return adapter.build(endpoint, values, force_external=True)
