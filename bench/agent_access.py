"""Benchmark of agents' reads by credential: ``GET /v1/api/calendar/event-types`` and ``GET
/v1/api/calendar/bookings/<id>``, each with an API key (``x-calendar-api-key``) and with an
OAuth access token (``Authorization: Bearer cba_…``) of the same sub account, against floor B
measured in the same run on the same server configuration.

Run from the project root (about 40 s; PostgreSQL at ``TEST_POSTGRES_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``, and Redis at ``TEST_REDIS_URL``, default
``redis://127.0.0.1:6379/0``)::

    .venv/bin/python -m bench.agent_access [--rounds N] [--runs N]

The data: one throw-away database (``bench.availability.postgres_database``), migrated, one
agency provisioned (``app.services.accounts.provisioning.provision``) with one sub account,
"Bench dental" (America/New_York, Mon–Fri 09:00–17:00, one host), its API key with the four
permissions, and ``EVENT_TYPES``: five event types, two of them asking booking questions
(between them the six question types: text, phone, select, boolean on "New patient"; email,
number on "Consultation"). ``BOOKINGS`` confirmed bookings, bulk inserted, one every two hours
from the Monday after today, the event types in turn, each with one attendee and, for the types
with questions, its answers. The OAuth side, as the consent screen and the token endpoint
would leave it (``app.services.accounts.agent_access``, in this process, no browser): a client
registered (``register_client``), the owner's grant of the sub account with the four
permissions (``grant_access``), and an access and refresh token pair kept
(``keep_tokens``, the access token valid a day); the plain access token is the bearer.

The servers: two, side by side, each as the Procfile's ``web`` (``gunicorn -c
gunicorn.conf.py``, ``bench.hot_path.procfile_server``: 2 gevent workers, one environment,
``bench.capacity.service_env``, with the rate limit at 1,000,000/minute in Redis under a key
prefix of the run's own, so the limiter runs on every request but refuses none):

* the floors, ``bench.floor_app`` (floor B: ``GET /floor/select/<id>``, one primary-key
  ``SELECT`` of a booking row);
* the API, ``wsgi:app``, as deployed.

The requests: one client, sequential, a keep-alive connection to the floors and one to the API
per credential. ``WARMUP`` untimed iterations, then ``ROUNDS`` rounds of ``RUNS``; each
iteration sends every request once (``KINDS``), in a freshly shuffled order: floor B, the event
types with the key and with the bearer, and the booking by id with the key and with the bearer.
Floor B and both by-id requests read the same booking, the seeded ids in turn.

The checks: every answer 200. Before timing, a bearer token never issued is refused (401), so
the bearer's 200s come from its token. The event types: the five by name with their
provisioned ids and host, and each type's ``questions`` the JSON Schema of its questions (the
keys in the order asked, each titled with its label and of its type's shape, the required ones
listed, no other keys); every timed answer repeats the first, and the bearer's is the key's,
byte for byte. A booking: its id, its attendee and its answers as seeded, and the bearer's
answer the key's, byte for byte. No ERROR or traceback in either server's log.

The figures: median and p95 of each, pooled over the rounds with the rounds' range of medians;
bearer ÷ key for each path and each ÷ floor B. Then, with the servers stopped, the SQL
statements each API request runs (in this process, Flask's test client on the same database and
Redis, the second of two requests in a row, as the API key's is then kept in memory).
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from typing import Any

from flask_migrate import upgrade
from sqlalchemy import event, insert

from app import create_app
from app.extensions import db
from app.models import Attendee, Booking, Permission, SubAccount
from app.models.types import utcnow
from app.scheduling.timezones import zone
from app.services.accounts.agent_access import (
    CLIENT_ID_PREFIX,
    SCOPES,
    grant_access,
    keep_tokens,
    new_access_token,
    new_refresh_token,
    register_client,
)
from app.services.accounts.provisioning import provision
from app.services.common.tokens import new_token
from bench import availability, capacity, teams
from bench.availability import API_KEY_HEADER, TIMEZONE
from bench.hot_path import BY_ID, FLOOR_A, FLOOR_B, Server, procfile_server

EVENT_TYPES_PATH = "/v1/api/calendar/event-types"
HOST = "Dr. Lee"
BOOKINGS = 300
BOOKING_EVERY = timedelta(hours=2)  # longer than any type's duration and buffer: no overlap
FIRST_START = clock(13, 0)  # UTC, on the Monday after today
ACCESS_TOKEN_SECONDS = 86_400
REFRESH_TOKEN_LIFETIME = timedelta(days=30)
REDIRECT_URI = "http://127.0.0.1:9/cb"
SEED = 20261208

ROUNDS, RUNS, WARMUP = 3, 300, 30

NEW_PATIENT_QUESTIONS = [
    {"key": "reason", "label": "Reason for the visit", "type": "text", "required": True},
    {"key": "phone", "label": "Phone number", "type": "phone", "required": True},
    {
        "key": "insurer",
        "label": "Dental insurance",
        "type": "select",
        "required": False,
        "options": ["None", "Aetna", "Cigna", "Delta Dental", "Other"],
    },
    {"key": "referred", "label": "Referred by a dentist", "type": "boolean", "required": False},
]
CONSULTATION_QUESTIONS = [
    {"key": "summaryEmail", "label": "Email for the summary", "type": "email", "required": False},
    {"key": "age", "label": "Age", "type": "number", "required": True},
]
EVENT_TYPES: list[dict[str, Any]] = [
    {"name": "Checkup", "duration": 60},
    {"name": "Cleaning", "duration": 30, "bufferAfter": 10},
    {"name": "Consultation", "duration": 30, "questions": CONSULTATION_QUESTIONS},
    {"name": "Emergency visit", "duration": 45, "minimumNoticeMinutes": 0},
    {"name": "New patient", "duration": 60, "bufferAfter": 15, "questions": NEW_PATIENT_QUESTIONS},
]
ANSWERS = {  # a booking's answers, by its event type
    "Consultation": {"summaryEmail": "pat@bench.test", "age": 41},
    "New patient": {"reason": "A chipped tooth", "phone": "+1 212 555 0100", "insurer": "Cigna"},
}
# The JSON Schema type of each question type's answer (app.services.availability.questions).
SCHEMA_TYPES = {
    "text": "string",
    "email": "string",
    "phone": "string",
    "number": "number",
    "boolean": "boolean",
    "select": "string",
}

KINDS = {
    "floor_b": "floor B: GET, one PK SELECT",
    "types_key": "event types, API key",
    "types_bearer": "event types, bearer token",
    "by_id_key": "booking by id, API key",
    "by_id_bearer": "booking by id, bearer token",
}
RATIOS = (
    teams.Ratio("event types: bearer ÷ key", "types_bearer", "types_key"),
    teams.Ratio("booking by id: bearer ÷ key", "by_id_bearer", "by_id_key"),
    teams.Ratio("event types, key ÷ floor B", "types_key", "floor_b"),
    teams.Ratio("event types, bearer ÷ floor B", "types_bearer", "floor_b"),
    teams.Ratio("booking by id, key ÷ floor B", "by_id_key", "floor_b"),
    teams.Ratio("booking by id, bearer ÷ floor B", "by_id_bearer", "floor_b"),
)


# --- the workload ----------------------------------------------------------------------------


def tenant_document() -> dict[str, Any]:
    hours = {day: [["09:00", "17:00"]] for day in ("mon", "tue", "wed", "thu", "fri")}
    return {
        "agencies": [
            {
                "name": "Bench agency, agents",
                "owner": {"email": "owner-agents@bench.test", "password": "s3cret-pass"},
                "subAccounts": [
                    {
                        "name": "Bench dental",
                        "timezone": TIMEZONE,
                        "settings": {
                            "defaultDuration": 30,
                            "minimumNoticeMinutes": 60,
                            "bookingHorizonDays": 90,
                        },
                        "hosts": [{"name": HOST}],
                        "availabilityProfiles": [
                            {"name": "Office", "default": True, "weeklyHours": hours}
                        ],
                        "eventTypes": EVENT_TYPES,
                        "apiKeys": [
                            {"name": "bench", "permissions": [p.value for p in Permission]}
                        ],
                    }
                ],
            }
        ]
    }


@dataclass(frozen=True)
class Seeded:
    """What a seeded booking's answer must say of it."""

    email: str
    responses: dict[str, Any]


@dataclass(frozen=True)
class Tenant:
    api_key: str
    access_token: str
    event_types: dict[str, int]
    host_id: int
    bookings: dict[int, Seeded]  # by id, in insertion order


def populate(url: str, first_day: datetime) -> Tenant:
    """Migrate, provision, bulk-insert the bookings, and connect an agent with OAuth: a
    registered client, the owner's grant and a kept token pair."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": capacity.SECRET_KEY})
    with app.app_context():
        with redirect_stderr(io.StringIO()):  # alembic's INFO lines
            upgrade()
        agency = provision(tenant_document())["agencies"][0]
        created = agency["subAccounts"][0]
        event_types: dict[str, int] = created["eventTypes"]
        host_id = created["hosts"][HOST]
        now = utcnow()
        rows = []
        for n in range(BOOKINGS):
            kind = EVENT_TYPES[n % len(EVENT_TYPES)]
            start = first_day + n * BOOKING_EVERY
            end = start + timedelta(minutes=kind["duration"])
            rows.append(
                {
                    "uid": f"bench-agents-{n}",
                    "sub_account_id": created["id"],
                    "host_id": host_id,
                    "event_type_id": event_types[kind["name"]],
                    "status": "confirmed",
                    "title": f"{kind['name']} with patient{n}@bench.test",
                    "timezone": TIMEZONE,
                    "meta": {},
                    "responses": ANSWERS.get(kind["name"], {}),
                    "start_at": start,
                    "end_at": end,
                    "occupied_start": start,
                    "occupied_end": end + timedelta(minutes=kind.get("bufferAfter", 0)),
                    "confirmed_at": now,
                    "created_at": now,
                    "updated_at": now,
                }
            )
        booking_ids = db.session.scalars(
            insert(Booking).returning(Booking.id, sort_by_parameter_order=True), rows
        ).all()
        db.session.execute(
            insert(Attendee),
            [
                {
                    "booking_id": booking_id,
                    "email": f"patient{n}@bench.test",
                    "name": f"patient{n}",
                    "timezone": TIMEZONE,
                    "created_at": now,
                    "updated_at": now,
                }
                for n, booking_id in enumerate(booking_ids)
            ],
        )
        sub_account = db.session.get(SubAccount, created["id"])
        assert sub_account is not None
        client = register_client(
            client_id=CLIENT_ID_PREFIX + new_token(),
            name="Bench agent",
            redirect_uris=[REDIRECT_URI],
            client_uri=None,
            now=now,
        )
        grant = grant_access(
            client=client,
            sub_account=sub_account,
            permissions=[p.value for p in Permission],
            user_id=agency["ownerId"],
            now=now,
        )
        access_token = new_access_token()
        keep_tokens(
            {
                "access_token": access_token,
                "refresh_token": new_refresh_token(),
                "expires_in": ACCESS_TOKEN_SECONDS,
                "scope": " ".join(SCOPES),
            },
            client=client,
            grant=grant,
            resource=None,
            refresh_lifetime=REFRESH_TOKEN_LIFETIME,
            now=now,
        )
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    return Tenant(
        api_key=created["apiKeys"]["bench"],
        access_token=access_token,
        event_types=event_types,
        host_id=host_id,
        bookings={
            booking_id: Seeded(f"patient{n}@bench.test", rows[n]["responses"])
            for n, booking_id in enumerate(booking_ids)
        },
    )


# --- the requests ----------------------------------------------------------------------------


def key_headers(tenant: Tenant) -> dict[str, str]:
    return {API_KEY_HEADER: tenant.api_key}


def bearer_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def connection(port: int, headers: dict[str, str]) -> teams.Connection:
    """A keep-alive connection sending ``headers`` (a key's or a bearer's) with each request."""
    opened = teams.Connection(port, "")
    opened.headers = {**headers, "Accept": "application/json"}
    return opened


def status_of(port: int, path: str, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


class Client:
    """The sequential client: a connection to the floors, and one to the API per credential."""

    def __init__(self, tenant: Tenant, floors: Server, api: Server) -> None:
        self.tenant = tenant
        self.floors = connection(floors.port, {})
        self.key = connection(api.port, key_headers(tenant))
        self.bearer = connection(api.port, bearer_headers(tenant.access_token))
        self.types = {
            "types_key": teams.Question(self.key, EVENT_TYPES_PATH),
            "types_bearer": teams.Question(self.bearer, EVENT_TYPES_PATH),
        }
        self.booking_ids = list(tenant.bookings)
        self.turn = 0
        self.answers: dict[str, bytes] = {}

    def timed(self, kind: str, booking_id: int) -> float:
        if kind in self.types:
            return self.types[kind].ask()
        if kind == "floor_b":
            elapsed, body, _ = self.floors.get(FLOOR_B.format(booking_id))
            if json.loads(body)["id"] != booking_id:
                raise SystemExit(f"FAILED: floor B answered another row than {booking_id}")
            return elapsed
        via = self.key if kind == "by_id_key" else self.bearer
        elapsed, body, _ = via.get(BY_ID.format(booking_id))
        self.answers[kind] = body
        return elapsed

    def iteration(self, rng: random.Random) -> dict[str, float]:
        booking_id = self.booking_ids[self.turn % len(self.booking_ids)]
        self.turn += 1
        order = list(KINDS)
        rng.shuffle(order)
        elapsed = {kind: self.timed(kind, booking_id) for kind in order}
        check_booking(self.answers["by_id_key"], booking_id, self.tenant.bookings[booking_id])
        if self.answers["by_id_bearer"] != self.answers["by_id_key"]:
            raise SystemExit(f"FAILED: booking {booking_id}: the bearer's answer is not the key's")
        return elapsed

    def close(self) -> None:
        for opened in (self.floors, self.key, self.bearer):
            opened.close()


# --- the checks ------------------------------------------------------------------------------


def check_booking(body: bytes, booking_id: int, seeded: Seeded) -> None:
    booking = json.loads(body)
    emails = [attendee["email"] for attendee in booking["attendees"]]
    if booking["id"] != booking_id or emails != [seeded.email]:
        raise SystemExit(f"FAILED: GET {BY_ID.format(booking_id)}: {body[:300]!r}")
    if booking.get("responses", {}) != seeded.responses:
        raise SystemExit(f"FAILED: booking {booking_id}'s answers: {booking.get('responses')}")


def expected_questions(questions: list[dict[str, Any]]) -> dict[str, Any]:
    """What the event types' answer must say of these questions, as checked here: the keys in
    order, each title and type, a select's options, the required keys."""
    return {
        "keys": [q["key"] for q in questions],
        "shapes": [
            (q["label"], SCHEMA_TYPES[q["type"]], q.get("options") or None) for q in questions
        ],
        "required": [q["key"] for q in questions if q["required"]],
        "additionalProperties": False,
    }


def told_questions(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema["properties"]
    return {
        "keys": list(properties),
        "shapes": [(p["title"], p["type"], p.get("enum")) for p in properties.values()],
        "required": schema["required"],
        "additionalProperties": schema["additionalProperties"],
    }


def check_event_types(body: bytes, tenant: Tenant) -> None:
    told = json.loads(body)
    names = [t["name"] for t in told]
    if names != sorted(kind["name"] for kind in EVENT_TYPES):
        raise SystemExit(f"FAILED: event types {names}")
    for kind, answer in zip(sorted(EVENT_TYPES, key=lambda k: k["name"]), told, strict=True):
        wanted = expected_questions(kind.get("questions", []))
        if (
            answer["id"] != tenant.event_types[kind["name"]]
            or answer["duration"] != kind["duration"]
            or answer["hosts"] != [{"id": tenant.host_id, "name": HOST}]
            or told_questions(answer["questions"]) != wanted
        ):
            raise SystemExit(f"FAILED: event type {kind['name']}: {answer}")


# --- the run ---------------------------------------------------------------------------------


@contextmanager
def servers(env: dict[str, str], log_dir: Path) -> Iterator[tuple[Server, Server]]:
    def metrics(name: str) -> dict[str, str]:
        return {"PROMETHEUS_MULTIPROC_DIR": str(log_dir / f"{name}-metrics")}

    with (
        procfile_server(
            "the floors", "bench.floor_app:app", {**env, **metrics("floors")},
            log_dir / "floors.log", FLOOR_A,
        ) as floors,
        procfile_server(
            "the API", "wsgi:app", {**env, **metrics("api")}, log_dir / "api.log", "/healthz"
        ) as api,
    ):  # fmt: skip
        yield floors, api


def measure(args: argparse.Namespace, the_client: Client) -> list[dict[str, list[float]]]:
    rng = random.Random(SEED)
    for _ in range(WARMUP):
        the_client.iteration(rng)
    return teams.timed_rounds(the_client, rng, KINDS, args.rounds, args.runs)


def report(rounds: list[dict[str, list[float]]]) -> None:
    teams.print_medians(rounds, KINDS, RATIOS, kind_width=30, ratio_width=34)


def statements(url: str, tenant: Tenant, prefix: str) -> None:
    """The SQL statements each API request runs, in this process (Flask's test client, the
    same database and Redis): the second of two requests in a row."""
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": url,
            "SECRET_KEY": capacity.SECRET_KEY,
            "REDIS_URL": capacity.REDIS_URL,
            "RATELIMIT_KEY_PREFIX": prefix,
            "RATE_LIMIT": capacity.RATE_LIMIT,
        }
    )
    booking_id = next(iter(tenant.bookings))
    asked = {
        "types_key": (EVENT_TYPES_PATH, key_headers(tenant)),
        "types_bearer": (EVENT_TYPES_PATH, bearer_headers(tenant.access_token)),
        "by_id_key": (BY_ID.format(booking_id), key_headers(tenant)),
        "by_id_bearer": (BY_ID.format(booking_id), bearer_headers(tenant.access_token)),
    }
    counted: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        counted.append(statement)

    with app.app_context():
        engine = db.engine
    # Requests outside any app context: each pushes its own (one pushed here would be shared,
    # its ``g`` with it, and every request would act as the first one's credential).
    test_client = app.test_client()
    counts = {}
    event.listen(engine, "before_cursor_execute", count)
    for kind, (path, headers) in asked.items():
        for _ in range(2):
            counted.clear()
            response = test_client.get(path, headers=headers)
            if response.status_code != 200:
                raise SystemExit(f"FAILED: in this process, {kind}: {response.status_code}")
        counts[kind] = len(counted)
    event.remove(engine, "before_cursor_execute", count)
    engine.dispose()
    print(
        "SQL statements a request runs (in this process, the second of two in a row): "
        + ", ".join(f"{KINDS[kind]} {n}" for kind, n in counts.items())
    )


def run(args: argparse.Namespace, log_dir: Path) -> None:
    today = utcnow().astimezone(zone(TIMEZONE)).date()
    first_day = datetime.combine(availability.next_monday(today), FIRST_START, tzinfo=UTC)
    queue, prefix = f"bench-agents-{uuid.uuid4().hex}", f"bench-{uuid.uuid4().hex}"
    with availability.postgres_database() as url:
        started = time.monotonic()
        tenant = populate(url, first_day)
        print(f"set-up {time.monotonic() - started:.1f} s")
        print(
            f"data: 1 sub account, {len(EVENT_TYPES)} event types"
            f" ({sum(1 for k in EVENT_TYPES if k.get('questions'))} with questions:"
            f" {len(NEW_PATIENT_QUESTIONS) + len(CONSULTATION_QUESTIONS)} questions),"
            f" {len(tenant.bookings)} bookings with one attendee each; an API key and an OAuth"
            " grant with the four permissions, its access token kept"
        )
        env = capacity.service_env(url, queue, prefix, "")
        try:
            with servers(env, log_dir) as (floors, api):
                print(
                    f"servers: gunicorn -c gunicorn.conf.py, {floors.worker_class} workers:"
                    f" {len(floors.workers)} (floors), {len(api.workers)} (API)"
                )
                refused = status_of(api.port, EVENT_TYPES_PATH, bearer_headers(new_access_token()))
                if refused != 401:
                    raise SystemExit(f"FAILED: a bearer token never issued answered {refused}")
                the_client = Client(tenant, floors, api)
                try:
                    rounds = measure(args, the_client)
                    types = the_client.types
                    check_event_types(types["types_key"].body, tenant)
                    if types["types_bearer"].body != types["types_key"].body:
                        raise SystemExit("FAILED: the bearer's event types are not the key's")
                finally:
                    the_client.close()
            teams.check_logs(log_dir, ["floors.log", "api.log"])
            print(
                "answers: 200; a bearer token never issued 401; the event types as provisioned"
                " (ids, host, questions' schemas), every answer the first, the bearer's the"
                " key's; each booking as seeded, the bearer's the key's; no ERROR in the logs"
            )
            print(
                f"{args.rounds} rounds × {args.runs} iterations after {WARMUP} untimed; each"
                " iteration sends everything once, in a shuffled order"
            )
            print()
            report(rounds)
            print()
            statements(url, tenant, prefix)
        finally:
            capacity.forget_keys(queue, prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"default {ROUNDS}")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"per round, default {RUNS}")
    args = parser.parse_args()
    teams.run_measured(
        "Agents' reads: event types and a booking, API key against OAuth bearer, and floor B",
        lambda tmp: run(args, tmp),
    )


if __name__ == "__main__":
    main()
