"""The areas of a sub account's dashboard, in the order the menu shows them.

An area is shown once its page exists (its endpoint is registered) and, for owners-only areas,
only to agency owners; the pages themselves check again (``owners_only``), since a menu
hides nothing from someone who types the URL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import ParamSpec, TypeVar

from flask import abort, current_app
from flask_login import current_user

from app.models import Role, User

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Area:
    label: str
    endpoint: str
    owners_only: bool = False


AREAS = (
    Area("Overview", "dashboard.overview"),
    Area("Calendar", "dashboard.calendar"),
    Area("Bookings", "dashboard.bookings"),
    Area("Event types", "dashboard.event_types"),
    Area("Hosts", "dashboard.hosts"),
    Area("Availability", "dashboard.availability"),
    Area("Contacts", "dashboard.contacts"),
    Area("Connections", "dashboard.connections"),
    Area("Notifications", "dashboard.notifications"),
    Area("Settings", "dashboard.settings"),
    Area("API keys", "dashboard.api_keys", owners_only=True),
)


def is_owner(user: User) -> bool:
    return user.is_authenticated and user.role == Role.AGENCY_OWNER


def areas_for(user: User) -> list[Area]:
    """The areas ``user`` sees in the menu."""
    return [
        area
        for area in AREAS
        if area.endpoint in current_app.view_functions and (not area.owners_only or is_owner(user))
    ]


def owners_only(view: Callable[P, R]) -> Callable[P, R]:
    """Agency owners only: anyone else is refused with 403 (they are signed in, and the page
    exists for their agency, but it is not theirs to use). Marks the view, so a test can find
    every such page."""

    @wraps(view)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if not is_owner(current_user):
            abort(403)
        return view(*args, **kwargs)

    checked.owners_only = True  # type: ignore[attr-defined]
    return checked
