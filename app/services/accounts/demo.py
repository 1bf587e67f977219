"""The demo workspace behind ``flask demo``: provisioned once, then reused."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import select, update

from app.extensions import db
from app.models import ApiKey, EventType, Permission, SubAccount, User
from app.models.types import utcnow
from app.scheduling.timezones import zone
from app.services.accounts.api_keys import issue_api_key
from app.services.accounts.passwords import hash_password
from app.services.accounts.provisioning import provision

DEMO_EMAIL = "demo-owner@example.com"

_WORKDAY = [["09:00", "17:00"]]
# What each demo event type asks before it is booked, by its name: a consultation's answers
# are optional (the documented create gives them), a cleaning's insurer is required.
DEMO_QUESTIONS = {
    "Consultation": [
        {
            "key": "reason",
            "label": "Reason for the visit",
            "type": "select",
            "required": False,
            "options": ["Check-up", "Tooth pain", "Cleaning"],
        },
        {
            "key": "newPatient",
            "label": "First visit?",
            "type": "boolean",
            "required": False,
            "options": [],
        },
    ],
    "Cleaning": [
        {
            "key": "insurer",
            "label": "Dental insurer (or none)",
            "type": "text",
            "required": True,
            "options": [],
        }
    ],
}
DEMO_DOCUMENT = {
    "agencies": [
        {
            "name": "Demo Agency",
            "owner": {"email": DEMO_EMAIL, "password": "replaced-on-every-run"},
            "subAccounts": [
                {
                    "name": "Demo Dental",
                    "timezone": "America/New_York",
                    "settings": {"defaultDuration": 30, "bookingHorizonDays": 60},
                    "availabilityProfiles": [
                        {
                            "name": "Office hours",
                            "default": True,
                            "weeklyHours": {
                                d: _WORKDAY for d in ("mon", "tue", "wed", "thu", "fri")
                            },
                        }
                    ],
                    "eventTypes": [
                        {
                            "name": "Consultation",
                            "duration": 30,
                            "bufferAfter": 10,
                            "questions": DEMO_QUESTIONS["Consultation"],
                        },
                        {
                            "name": "Cleaning",
                            "duration": 60,
                            "slotInterval": 30,
                            "questions": DEMO_QUESTIONS["Cleaning"],
                        },
                    ],
                }
            ],
        }
    ]
}


@dataclass(frozen=True)
class DemoAccess:
    email: str
    password: str
    api_key: str
    sub_account_id: int
    event_type_ids: dict[str, int]


# The demo keys' names begin so: each run revokes the keys earlier runs made.
DEMO_KEY_PREFIX = "demo "


def ensure_demo() -> DemoAccess:
    """Provision the demo agency if missing; give its owner a fresh password and a fresh
    full-permission API key (plain values are never stored, so they cannot be shown again),
    named after the sub account's local time (the dashboard shows times in its zone). The
    demo keys of earlier runs are revoked: one full-permission demo key is active at a time."""
    owner = db.session.scalar(select(User).where(User.email == DEMO_EMAIL))
    if owner is None:
        provision(DEMO_DOCUMENT)
        owner = db.session.scalar(select(User).where(User.email == DEMO_EMAIL))
        assert owner is not None  # DEMO_DOCUMENT provisions the owner
    sub_account = db.session.scalars(
        select(SubAccount).where(SubAccount.agency_id == owner.agency_id).order_by(SubAccount.id)
    ).first()
    assert sub_account is not None  # the demo agency is provisioned with its sub account
    password = secrets.token_urlsafe(12)
    owner.password_hash = hash_password(password)
    db.session.execute(
        update(ApiKey)
        .where(
            ApiKey.sub_account_id == sub_account.id,
            ApiKey.name.startswith(DEMO_KEY_PREFIX),
            ApiKey.active.is_(True),
        )
        .values(active=False)
    )
    local = utcnow().astimezone(zone(sub_account.settings.timezone))
    _, plain_key = issue_api_key(
        agency=owner.agency,
        sub_account=sub_account,
        name=f"{DEMO_KEY_PREFIX}{local:%Y-%m-%d %H:%M:%S}",
        permissions=[p.value for p in Permission],
    )
    event_types = list(
        db.session.scalars(
            select(EventType)
            .where(EventType.sub_account_id == sub_account.id)
            .order_by(EventType.id)
        )
    )
    for event_type in event_types:
        # A demo provisioned before event types asked questions asks them now, so the
        # documented examples (which answer them) work on it too.
        if not event_type.questions and event_type.name in DEMO_QUESTIONS:
            event_type.questions = DEMO_QUESTIONS[event_type.name]
    return DemoAccess(
        email=DEMO_EMAIL,
        password=password,
        api_key=plain_key,
        sub_account_id=sub_account.id,
        event_type_ids={et.name: et.id for et in event_types},
    )
