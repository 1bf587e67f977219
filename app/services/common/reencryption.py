"""Re-encrypting every stored secret with the current ``SECRET_KEY``: the last step of a key
rotation, after which the old key can leave ``SECRET_KEY_FALLBACKS`` without any calendar
password or webhook secret becoming unreadable."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from sqlalchemy import select

from app.extensions import db
from app.models import CalendarConnection, WebhookSubscription
from app.services.common.encryption import SecretUnreadable, reencrypted

_HOLDERS = (("calendarConnections", CalendarConnection), ("webhooks", WebhookSubscription))


class _SecretHolder(Protocol):
    """A row of one of ``_HOLDERS`` that has a secret (the rows without one are not read)."""

    id: int
    encrypted_secret: str


@dataclass
class Reencryption:
    """How many secrets of each kind were rewritten, and the rows none of the keys can read
    (their secret must be entered again; they are left as they were)."""

    reencrypted: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, list[int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, dict]:
        return {"reencrypted": self.reencrypted, "unreadable": self.unreadable}


def reencrypt_stored_secrets(keys: Sequence[str]) -> Reencryption:
    """Rewrite every stored secret with ``keys[0]``, whichever of ``keys`` encrypted it. The
    rows are locked while rewritten, so a secret changed meanwhile is not overwritten with its
    old value. Safe to run again."""
    outcome = Reencryption()
    for kind, model in _HOLDERS:
        rows = cast(
            Iterable[_SecretHolder],
            db.session.scalars(
                select(model)
                .where(model.encrypted_secret.is_not(None))
                .order_by(model.id)
                .with_for_update()
            ),
        )
        outcome.reencrypted[kind], outcome.unreadable[kind] = 0, []
        for row in rows:
            try:
                row.encrypted_secret = reencrypted(row.encrypted_secret, keys)
                outcome.reencrypted[kind] += 1
            except SecretUnreadable:
                outcome.unreadable[kind].append(row.id)
    return outcome
