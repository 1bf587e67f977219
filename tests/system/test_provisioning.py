"""flask provision FILE: creates what the document describes, in one transaction."""

from __future__ import annotations

import copy
import json

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import (
    ApiKey,
    AvailabilityProfile,
    BlockedTime,
    CalendarConnection,
    DateOverride,
    EventType,
    SubAccount,
    User,
    WeeklyHours,
)
from app.services.accounts.passwords import verify_password
from app.services.common.encryption import decrypt_secret

ISSUE_EXAMPLE = {
    "agencies": [
        {
            "name": "Acme",
            "owner": {"email": "owner@acme.test", "password": "s3cret-pass"},
            "apiKeys": [{"name": "agency-level", "permissions": ["canGetBookings"]}],
            "subAccounts": [
                {
                    "name": "Downtown Dental",
                    "timezone": "America/New_York",
                    "settings": {
                        "defaultDuration": 30,
                        "minimumNoticeMinutes": 0,
                        "bookingHorizonDays": 60,
                    },
                    "availabilityProfiles": [
                        {
                            "name": "Office",
                            "timezone": "America/New_York",
                            "default": True,
                            "weeklyHours": {
                                "mon": [["09:00", "17:00"]],
                                "tue": [["09:00", "12:00"], ["13:00", "17:00"]],
                            },
                            "dateOverrides": [{"date": "2026-12-24", "hours": []}],
                        }
                    ],
                    "blockedTimes": [
                        {
                            "start": "2026-12-01T15:00:00Z",
                            "end": "2026-12-01T16:00:00Z",
                            "reason": "Staff meeting",
                        }
                    ],
                    "eventTypes": [
                        {
                            "name": "Cleaning",
                            "duration": 30,
                            "bufferBefore": 0,
                            "bufferAfter": 10,
                            "slotInterval": 15,
                            "location": "Room 2",
                            "availabilityProfile": "Office",
                            "minimumNoticeMinutes": 60,
                            "bookingHorizonDays": 30,
                        }
                    ],
                    "apiKeys": [
                        {
                            "name": "agent",
                            "permissions": [
                                "canCheckAvailability",
                                "canGetBookings",
                                "canBook",
                                "canCancel",
                            ],
                            "expiresAt": None,
                            "active": True,
                        }
                    ],
                    "calendarConnections": [
                        {
                            "name": "Dentist's calendar",
                            "url": "https://cloud.example.test/remote.php/dav",
                            "username": "dentist",
                            "password": "app-password",
                            "calendar": "Personal",
                            "writeBack": True,
                        }
                    ],
                }
            ],
        }
    ]
}

COUNTED = [
    User,
    SubAccount,
    ApiKey,
    AvailabilityProfile,
    WeeklyHours,
    DateOverride,
    BlockedTime,
    EventType,
    CalendarConnection,
]


def row_counts():
    return {m.__name__: db.session.scalar(select(func.count()).select_from(m)) for m in COUNTED}


def run_provision(app, document, tmp_path):
    path = tmp_path / "doc.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return app.test_cli_runner().invoke(args=["provision", str(path)])


def test_provisions_the_documented_example(app, client, tmp_path):
    result = run_provision(app, ISSUE_EXAMPLE, tmp_path)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    (agency,) = out["agencies"]
    assert set(agency) == {"id", "name", "ownerId", "apiKeys", "subAccounts"}
    (sub,) = agency["subAccounts"]
    assert set(sub) == {
        "id",
        "name",
        "hosts",
        "eventTypes",
        "availabilityProfiles",
        "apiKeys",
        "calendarConnections",
        "webhooks",
    }
    assert sub["name"] == "Downtown Dental"
    assert list(sub["hosts"]) == ["Downtown Dental"]  # no hosts named: the one host

    owner = db.session.get(User, agency["ownerId"])
    assert owner.role == "agency_owner" and owner.password_hash.startswith("$argon2id$")
    assert verify_password(owner.password_hash, "s3cret-pass")

    cleaning = db.session.get(EventType, sub["eventTypes"]["Cleaning"])
    assert (cleaning.duration, cleaning.buffer_after, cleaning.slot_interval) == (30, 10, 15)
    assert cleaning.availability_profile_id == sub["availabilityProfiles"]["Office"]
    assert (cleaning.minimum_notice_minutes, cleaning.booking_horizon_days) == (60, 30)

    profile = db.session.get(AvailabilityProfile, sub["availabilityProfiles"]["Office"])
    assert profile.is_default
    assert [(h.weekday, h.start_minute, h.end_minute) for h in profile.weekly_hours] == [
        (0, 540, 1020),
        (1, 540, 720),
        (1, 780, 1020),
    ]
    assert [(o.date.isoformat(), o.start_minute) for o in profile.date_overrides] == [
        ("2026-12-24", None)
    ]

    agent_key = sub["apiKeys"]["agent"]
    response = client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": agent_key})
    assert response.status_code == 200
    agency_key = agency["apiKeys"]["agency-level"]
    response = client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": agency_key})
    assert response.json["message"] == "API key not associated with a subaccount"


def test_calendar_connections_keep_the_password_encrypted(app, tmp_path):
    doc = copy.deepcopy(ISSUE_EXAMPLE)
    connections = doc["agencies"][0]["subAccounts"][0]["calendarConnections"]
    connections.append(
        {
            "name": "Family",
            "url": "http://127.0.0.1:5232/",
            "username": "dentist",
            "password": "other-secret",
        }
    )
    result = run_provision(app, doc, tmp_path)
    assert result.exit_code == 0, result.output
    assert "app-password" not in result.output and "other-secret" not in result.output
    sub = json.loads(result.output)["agencies"][0]["subAccounts"][0]
    ids = sub["calendarConnections"]
    assert list(ids) == ["Dentist's calendar", "Family"]

    personal = db.session.get(CalendarConnection, ids["Dentist's calendar"])
    assert (personal.sub_account_id, personal.kind, personal.active) == (
        sub["id"],
        "caldav",
        True,
    )
    assert (personal.url, personal.username, personal.calendar, personal.write_back) == (
        "https://cloud.example.test/remote.php/dav",
        "dentist",
        "Personal",
        True,
    )
    assert "app-password" not in personal.encrypted_secret
    assert decrypt_secret(personal.encrypted_secret, [app.config["SECRET_KEY"]]) == "app-password"
    family = db.session.get(CalendarConnection, ids["Family"])
    assert (family.calendar, family.write_back) == (None, True)  # the only calendar; default
    assert (family.busy_count, family.consecutive_failures, family.last_success_at) == (0, 0, None)


def test_reads_the_document_from_stdin(app):
    result = app.test_cli_runner().invoke(args=["provision", "-"], input=json.dumps(ISSUE_EXAMPLE))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["agencies"][0]["name"] == "Acme"


def test_past_expiry_and_inactive_keys_are_allowed(app, client, tmp_path):
    doc = copy.deepcopy(ISSUE_EXAMPLE)
    doc["agencies"][0]["subAccounts"][0]["apiKeys"] = [
        {"name": "old", "permissions": [], "expiresAt": "2021-01-01T00:00:00Z"},
        {"name": "off", "permissions": [], "active": False},
    ]
    result = run_provision(app, doc, tmp_path)
    assert result.exit_code == 0, result.output
    keys = json.loads(result.output)["agencies"][0]["subAccounts"][0]["apiKeys"]
    old = client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": keys["old"]})
    assert old.json["message"] == "API key has expired"
    off = client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": keys["off"]})
    assert off.json["message"] == "Invalid or inactive API key"


def _broken(path_setter):
    doc = copy.deepcopy(ISSUE_EXAMPLE)
    path_setter(doc["agencies"][0])
    return doc


BAD_DOCUMENTS = {
    "bad timezone": (
        _broken(lambda a: a["subAccounts"][0].update(timezone="Mars/Olympus")),
        "agencies[0].subAccounts[0].timezone",
    ),
    "bad hours": (
        _broken(
            lambda a: a["subAccounts"][0]["availabilityProfiles"][0]["weeklyHours"].update(
                wed=[["17:00", "09:00"]]
            )
        ),
        "agencies[0].subAccounts[0].availabilityProfiles[0].weeklyHours.wed",
    ),
    "unknown profile": (
        _broken(lambda a: a["subAccounts"][0]["eventTypes"][0].update(availabilityProfile="Nope")),
        "agencies[0].subAccounts[0].eventTypes[0].availabilityProfile",
    ),
    "bad permission": (
        _broken(lambda a: a["apiKeys"][0].update(permissions=["canEverything"])),
        "agencies[0].apiKeys[0].permissions[0]",
    ),
    "duration too long": (
        _broken(lambda a: a["subAccounts"][0]["eventTypes"][0].update(duration=2000)),
        "agencies[0].subAccounts[0].eventTypes[0].duration",
    ),
    "blocked end before start": (
        _broken(
            lambda a: a["subAccounts"][0]["blockedTimes"][0].update(end="2026-12-01T14:00:00Z")
        ),
        "agencies[0].subAccounts[0].blockedTimes[0].end",
    ),
    "missing owner": (_broken(lambda a: a.pop("owner")), "agencies[0].owner"),
    "connection url not http": (
        _broken(
            lambda a: a["subAccounts"][0]["calendarConnections"][0].update(url="ftp://x.test/")
        ),
        "agencies[0].subAccounts[0].calendarConnections[0].url",
    ),
    "credentials in the connection url": (
        _broken(
            lambda a: a["subAccounts"][0]["calendarConnections"][0].update(
                url="https://dentist:secret@cloud.example.test/dav"
            )
        ),
        "agencies[0].subAccounts[0].calendarConnections[0].url",
    ),
    "connection without password": (
        _broken(lambda a: a["subAccounts"][0]["calendarConnections"][0].pop("password")),
        "agencies[0].subAccounts[0].calendarConnections[0].password",
    ),
    "calendar url not http": (
        _broken(
            lambda a: a["subAccounts"][0]["calendarConnections"][0].update(calendar="ftp://x/y")
        ),
        "agencies[0].subAccounts[0].calendarConnections[0].calendar",
    ),
    "duplicate connection name": (
        _broken(
            lambda a: a["subAccounts"][0]["calendarConnections"].append(
                dict(a["subAccounts"][0]["calendarConnections"][0])
            )
        ),
        "agencies[0].subAccounts[0].calendarConnections[1].name",
    ),
    "unknown field": (_broken(lambda a: a.update(colour="red")), "agencies[0].colour"),
}


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_bad_document_names_the_path_and_writes_nothing(app, tmp_path, tenants, case):
    tenants.create()  # existing data must survive untouched
    before = row_counts()
    document, path = BAD_DOCUMENTS[case]
    result = run_provision(app, document, tmp_path)
    assert result.exit_code != 0
    assert path in result.output
    assert row_counts() == before


def test_second_agency_failing_rolls_back_the_first(app, tmp_path):
    good = copy.deepcopy(ISSUE_EXAMPLE["agencies"][0])
    bad = copy.deepcopy(good)
    bad["owner"]["email"] = "other@acme.test"
    bad["subAccounts"][0]["settings"]["defaultDuration"] = 1
    before = row_counts()
    result = run_provision(app, {"agencies": [good, bad]}, tmp_path)
    assert result.exit_code != 0
    assert "agencies[1].subAccounts[0].settings.defaultDuration" in result.output
    assert row_counts() == before


def test_owner_email_already_taken_is_refused(app, tmp_path):
    assert run_provision(app, ISSUE_EXAMPLE, tmp_path).exit_code == 0
    before = row_counts()
    result = run_provision(app, ISSUE_EXAMPLE, tmp_path)
    assert result.exit_code != 0
    assert "agencies[0].owner.email" in result.output
    assert row_counts() == before


def test_file_that_is_not_json_is_refused(app, tmp_path):
    result = run_provision(app, "{nope", tmp_path)
    assert result.exit_code != 0
    assert "not valid JSON" in result.output


def test_document_that_is_not_an_object_is_refused(app, tmp_path):
    result = run_provision(app, [1, 2], tmp_path)
    assert result.exit_code != 0
    assert "agencies" in result.output
