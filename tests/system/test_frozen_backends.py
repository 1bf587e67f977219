"""Nothing waits on a frozen Redis or PostgreSQL: under steady creates and reads, with Redis
frozen (SIGSTOP) for 5 s and then PostgreSQL frozen (postmaster and every backend) for 5 s,
every request is answered within 2 s, only with 200, 201 or a 503 that carries
``Retry-After`` and the JSON envelope; every 201's booking is stored, and every create not
answered 201 tells the truth when sent again with its idempotency key after the thaw.

A frozen server is the hard case: the kernel still accepts TCP connections into its backlog
and acknowledges what is sent, so only the client's own deadlines end a wait
(``app.deadlines``, ``app.database``, the Redis clients' socket timeouts).

Real processes throughout: a PostgreSQL and a Redis of the test's own (never the machine's
shared ones), migrated and provisioned here, behind gunicorn's gevent workers (the Procfile's
serving stack), with the production defaults for every timeout. Events are
published to the test's Redis (``OUTBOX_DISPATCH`` on); no worker consumes them.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from flask_migrate import upgrade
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app import create_app
from app.config import Settings
from app.database import RequestWaitSpent, bound_postgres_waits, engine_options
from app.deadlines import RequestWaitBudget, seconds_left, wait_budget
from app.extensions import db
from tests.factories import ALWAYS_OPEN, Tenant, TenantFactory, z
from tests.postgres_servers import OwnPostgres, own_postgres_server
from tests.redis_servers import OwnRedis, own_redis_server
from tests.servers import gunicorn

pytestmark = pytest.mark.slow

# The promise of docs/deployment.md ("When Redis or PostgreSQL freezes"): every answer within
# 2 s, whatever is frozen.
ANSWER_BOUND_S = 2.0
FREEZE_S = 5.0
SETTLE_S = 2.5  # steady load before the first freeze and after each thaw
CREATORS = 3
READERS = 2
PAUSE_S = 0.05  # between one client's requests
CLIENT_TIMEOUT_S = 10.0
SLOT = timedelta(minutes=15)


@dataclass
class Answer:
    kind: str  # "create", "availability" or "booking"
    sent_at: float
    seconds: float
    status: int  # 0: no answer within CLIENT_TIMEOUT_S
    retry_after: str | None
    replayed: bool
    body: dict
    payload: dict | None = None  # a create's body, to send it again

    @property
    def answered_at(self) -> float:
        return self.sent_at + self.seconds


@dataclass
class Service:
    postgres: OwnPostgres
    redis: OwnRedis
    database_url: str
    base: str
    tenant: Tenant


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with own_postgres_server(tmp_path) as postgres, own_redis_server(tmp_path) as own_redis:
        database_url = postgres.create_database("frozen")
        tenant = provision(database_url)
        env = {
            "REDIS_URL": own_redis.url,
            "OUTBOX_DISPATCH": "1",  # publish every create's event to the frozen broker too
            "RATE_LIMIT": "1000000/minute",
        }
        with gunicorn(database_url, workers=2, env=env, log_path=tmp_path / "web.log") as base:
            yield Service(postgres, own_redis, database_url, base, tenant)


def provision(database_url: str) -> Tenant:
    """Migrate, and provision a tenant whose 15-minute event type can be booked at any hour
    from now on (so the test runs the same at any date and hour)."""
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": database_url.replace(
                "postgresql://", "postgresql+psycopg://"
            ),
            "SECRET_KEY": "frozen-backends",
            "OUTBOX_DISPATCH": False,
        }
    )
    with app.app_context():
        upgrade()
        tenant = TenantFactory().create(
            settings={"defaultDuration": 15, "minimumNoticeMinutes": 0, "bookingHorizonDays": 365},
            availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
            eventTypes=[{"name": "Quick", "duration": 15, "availabilityProfile": "Always"}],
        )
        db.session.remove()
        db.engine.dispose()
    return tenant


def send(base: str, headers: dict[str, str], method: str, path: str, payload=None) -> tuple:
    """One request; returns (status, Retry-After, Idempotent-Replayed, JSON body, seconds)."""
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(
        base + path,
        data=data,
        method=method,
        headers={**headers, **({"Content-Type": "application/json"} if data else {})},
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=CLIENT_TIMEOUT_S) as response:
            status, answer_headers, body = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, answer_headers, body = error.code, error.headers, error.read()
    except OSError:  # no answer in time, or the connection dropped
        return 0, None, False, {}, time.monotonic() - started
    seconds = time.monotonic() - started
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = {"unparsed": body[:200].decode(errors="replace")}
    replayed = answer_headers.get("Idempotent-Replayed") == "true"
    return status, answer_headers.get("Retry-After"), replayed, parsed, seconds


@dataclass
class SteadyLoad:
    """Clients creating bookings (each on a slot of its own, with an idempotency key) and
    clients reading (availability, and a booking made earlier), until stopped."""

    service: Service
    answers: list[Answer] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    created: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        tomorrow = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        self.first_slot = tomorrow + timedelta(days=1)
        self.next_slot = 0
        self.lock = threading.Lock()
        self.event_type = self.service.tenant.event_types["Quick"]

    def record(self, kind: str, method: str, path: str, payload=None) -> Answer:
        sent_at = time.monotonic()
        status, retry_after, replayed, body, seconds = send(
            self.service.base, self.service.tenant.headers(), method, path, payload
        )
        answer = Answer(kind, sent_at, seconds, status, retry_after, replayed, body, payload)
        with self.lock:
            self.answers.append(answer)
        return answer

    def create_one(self) -> None:
        with self.lock:
            n, self.next_slot = self.next_slot, self.next_slot + 1
        start = self.first_slot + n * SLOT
        payload = {
            "startTime": z(start),
            "endTime": z(start + SLOT),
            "attendees": [{"email": f"steady{n}@example.test"}],
            "idempotencyKey": uuid.uuid4().hex,
        }
        path = f"/v1/api/calendar/event-types/{self.event_type}/bookings"
        answer = self.record("create", "POST", path, payload)
        if answer.status == 201:
            with self.lock:
                self.created.append(answer.body["id"])

    def read_one(self, turn: int) -> None:
        with self.lock:
            booking_id = self.created[-1] if self.created else None
        if turn % 2 and booking_id is not None:
            self.record("booking", "GET", f"/v1/api/calendar/bookings/{booking_id}")
            return
        day = self.first_slot.date() + timedelta(days=turn % 30)
        self.record(
            "availability",
            "GET",
            f"/v1/api/calendar/availability?eventTypeId={self.event_type}"
            f"&startDate={day.isoformat()}&endDate={day.isoformat()}",
        )

    def creator(self) -> None:
        while not self.stopping.is_set():
            self.create_one()
            time.sleep(PAUSE_S)

    def reader(self) -> None:
        turn = 0
        while not self.stopping.is_set():
            self.read_one(turn)
            turn += 1
            time.sleep(PAUSE_S)

    def __enter__(self) -> SteadyLoad:
        self.threads = [threading.Thread(target=self.creator) for _ in range(CREATORS)]
        self.threads += [threading.Thread(target=self.reader) for _ in range(READERS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=2 * CLIENT_TIMEOUT_S)


@dataclass
class Freeze:
    name: str
    began: float
    ended: float

    def overlaps(self, answer: Answer) -> bool:
        """Whether the request was in flight at some moment of the freeze."""
        return answer.sent_at < self.ended and answer.answered_at > self.began


def frozen_for(name: str, freeze, thaw) -> Freeze:
    """``freeze``, FREEZE_S seconds, ``thaw`` (thawed whatever happens)."""
    began = time.monotonic()
    try:
        freeze()
        time.sleep(FREEZE_S)
    finally:
        thaw()
    return Freeze(name, began, time.monotonic())


def describe(answers: list[Answer]) -> str:
    if not answers:
        return "no answers"
    statuses: dict[int, int] = {}
    for answer in answers:
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
    seconds = sorted(answer.seconds for answer in answers)
    return (
        f"{len(answers)} answers {dict(sorted(statuses.items()))},"
        f" median {statistics.median(seconds):.3f} s,"
        f" p95 {seconds[int(0.95 * (len(seconds) - 1))]:.3f} s, max {seconds[-1]:.3f} s"
    )


def stored_bookings(database_url: str) -> set[int]:
    with psycopg.connect(database_url) as connection:
        return {row[0] for row in connection.execute("SELECT id FROM bookings")}


def created_events(database_url: str) -> set[int]:
    with psycopg.connect(database_url) as connection:
        return {
            row[0]
            for row in connection.execute(
                "SELECT booking_id FROM outbox_events WHERE kind = 'booking.created'"
            )
        }


def test_requests_never_wait_on_a_frozen_redis_or_postgres(service: Service) -> None:
    with SteadyLoad(service) as load:
        time.sleep(SETTLE_S)
        redis_freeze = frozen_for("redis", service.redis.freeze, service.redis.thaw)
        time.sleep(SETTLE_S)
        postgres_freeze = frozen_for("postgres", service.postgres.freeze, service.postgres.thaw)
        time.sleep(SETTLE_S)
    answers = sorted(load.answers, key=lambda answer: answer.sent_at)

    print()
    for freeze in (redis_freeze, postgres_freeze):
        during = [answer for answer in answers if freeze.overlaps(answer)]
        for kind in ("create", "availability", "booking"):
            of_kind = [answer for answer in during if answer.kind == kind]
            print(f"{freeze.name} frozen {FREEZE_S:.0f} s, {kind}: {describe(of_kind)}")
    print(f"whole run: {describe(answers)}")

    # Only 200, 201 and 503 with Retry-After and the envelope.
    unexpected = [(a.kind, a.status, a.body) for a in answers if a.status not in (200, 201, 503)]
    assert not unexpected, unexpected[:5]
    for answer in answers:
        if answer.status == 503:
            assert answer.retry_after is not None, answer
            assert answer.body["statusCode"] == 503 and answer.body["message"], answer

    # Every answer within the bound, those of requests in flight during a freeze included.
    slow = [
        (round(a.sent_at - redis_freeze.began, 2), a.kind, a.status, round(a.seconds, 2))
        for a in answers
        if a.seconds > ANSWER_BOUND_S
    ]
    assert not slow, (
        f"{len(slow)} answers over {ANSWER_BOUND_S} s (sent at, kind, status, s): {slow[:10]}"
    )

    # A frozen Redis costs nothing but its fallbacks: no 503s, bookings still made.
    during_redis = [a for a in answers if redis_freeze.overlaps(a)]
    assert {a.status for a in during_redis} <= {200, 201}
    assert any(a.kind == "create" and a.status == 201 for a in during_redis)
    # The PostgreSQL freeze was felt, and answered while it lasted.
    assert any(
        a.status == 503 and a.answered_at < postgres_freeze.ended
        for a in answers
        if postgres_freeze.overlaps(a)
    )

    # Every 201 is stored. Every other create, sent again with its key once all is thawed,
    # tells the truth: the booking it made (replayed), or a booking made now.
    creates = [a for a in answers if a.kind == "create"]
    answered_201 = {a.body["id"] for a in creates if a.status == 201}
    stored = stored_bookings(service.database_url)
    assert answered_201 <= stored, answered_201 - stored
    made_by_retry: set[int] = set()
    replayed_ids: set[int] = set()
    path = f"/v1/api/calendar/event-types/{service.tenant.event_types['Quick']}/bookings"
    for answer in creates:
        if answer.status == 201:
            assert not answer.replayed
            continue
        status, _, replayed, body, _ = send(
            service.base, service.tenant.headers(), "POST", path, answer.payload
        )
        assert status == 201, (status, body)
        if replayed:
            assert body["id"] in stored  # stored before the retry: answered 503, yet saved
            replayed_ids.add(body["id"])
        else:
            assert body["id"] not in stored
            made_by_retry.add(body["id"])
    print(
        f"creates: {len(answered_201)} answered 201; of {len(creates) - len(answered_201)}"
        f" others, {len(replayed_ids)} had been stored (replayed) and {len(made_by_retry)}"
        " were made by the retry"
    )
    # Nothing is stored that no answer accounts for, and every booking's event is recorded.
    final = stored_bookings(service.database_url)
    assert final == answered_201 | replayed_ids | made_by_retry
    assert created_events(service.database_url) == final


# --- each wait on PostgreSQL, one at a time ---------------------------------------------------

SHORT_WAIT_S = 0.3


@pytest.fixture(scope="module")
def own_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnPostgres]:
    with own_postgres_server(tmp_path_factory.mktemp("own-postgres")) as server:
        yield server


def postgres_engine(url: str, **settings: str) -> Engine:
    """An engine as the app makes it (``app.database``), with ``settings`` over the defaults."""
    configured = Settings(database_url=url, **{name.lower(): v for name, v in settings.items()})
    engine = create_engine(configured.database_url, **engine_options(configured))
    bound_postgres_waits(engine, configured)
    return engine


def backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return connection.execute(text("SELECT pg_backend_pid()")).scalar_one()


def error_while_frozen(own_postgres, engine) -> BaseException:
    """What a request with ``SHORT_WAIT_S`` to wait gets from reading the backend's pid while
    the server is frozen (the DBAPI error under SQLAlchemy's ``OperationalError``)."""
    own_postgres.freeze()
    try:
        with wait_budget(SHORT_WAIT_S), pytest.raises(OperationalError) as raised:
            backend_pid(engine)
    finally:
        own_postgres.thaw()
    return raised.value.orig


def test_a_statement_is_given_up_when_the_time_to_wait_is_spent_and_only_its_connection_dropped(
    own_postgres,
):
    engine = postgres_engine(own_postgres.url, DB_POOL_SIZE="2")
    try:
        with engine.connect() as first, engine.connect() as second:  # two pooled connections
            pids = {
                first.execute(text("SELECT pg_backend_pid()")).scalar_one(),
                second.execute(text("SELECT pg_backend_pid()")).scalar_one(),
            }
        assert isinstance(error_while_frozen(own_postgres, engine), RequestWaitSpent)
        # The other pooled connection was kept: a request out of time says nothing of the
        # server, and the next request is served without connecting anew.
        assert backend_pid(engine) in pids
    finally:
        engine.dispose()


def test_a_connection_under_way_is_given_up_when_the_time_to_wait_is_spent(own_postgres):
    """psycopg's connect timeout cannot go under 2 s; the request's time to wait ends it
    sooner (not psycopg's ``ConnectionTimeout``) and the late connection is closed."""
    engine = postgres_engine(own_postgres.url)
    try:
        assert isinstance(error_while_frozen(own_postgres, engine), RequestWaitSpent)
        assert backend_pid(engine) > 0
    finally:
        engine.dispose()


def test_a_rollback_out_of_time_closes_the_connection_instead_of_failing(own_postgres):
    """Flask's teardown rolls back an unfinished transaction: that must neither wait on a
    frozen server nor fail (a failure there drops the client's connection, no answer)."""
    engine = postgres_engine(own_postgres.url, DB_POOL_SIZE="1")
    try:
        connection = engine.connect()
        connection.execute(text("SELECT 1"))  # a transaction is open
        own_postgres.freeze()
        try:
            with wait_budget(SHORT_WAIT_S):
                connection.rollback()  # waits at most the time left, and does not raise
                assert connection.connection.dbapi_connection.closed
                connection.close()
        finally:
            own_postgres.thaw()
        assert backend_pid(engine) > 0  # the pool replaced the closed connection
    finally:
        engine.dispose()


def test_a_wait_for_a_pooled_connection_ends_when_the_time_to_wait_is_spent(own_postgres):
    """``DeadlinePool`` relies on SQLAlchemy's QueuePool reading ``_timeout`` when it waits for
    a connection: should that change, this wait lasts the whole ``DB_POOL_TIMEOUT_S``."""
    engine = postgres_engine(own_postgres.url, DB_POOL_SIZE="1", DB_POOL_TIMEOUT_S="30")
    try:
        with engine.connect():  # the pool's one connection, taken
            started = time.monotonic()
            with wait_budget(SHORT_WAIT_S), pytest.raises(PoolTimeout) as raised:
                engine.connect()
            waited = time.monotonic() - started
        assert "timeout 30" not in str(raised.value), raised.value
        assert waited < 15, f"waited {waited:.1f} s for a pooled connection"
        with wait_budget(SHORT_WAIT_S):
            engine.dispose()  # a fresh pool keeps the configured wait, not what was left
        assert engine.pool.timeout() == 30
    finally:
        engine.dispose()


def test_only_waiting_is_charged_to_the_time_to_wait(own_postgres):
    """The request's own work (a first request building caches, a busy CPU) is not charged;
    every wait is, nested ones once."""
    engine = postgres_engine(own_postgres.url)
    try:
        with wait_budget(1.0), engine.connect() as connection:
            time.sleep(1.2)  # work, not a wait on PostgreSQL
            connection.execute(text("SELECT pg_sleep(0.6)"))  # a wait: 0.4 s or less left
            with pytest.raises(OperationalError) as raised:
                connection.execute(text("SELECT pg_sleep(0.6)"))
        assert isinstance(raised.value.orig, RequestWaitSpent)
    finally:
        engine.dispose()


def test_the_time_to_wait_is_each_requests_own():
    """Given afresh to the app's work on each request, none outside (workers, the command
    line)."""
    seen: list[float | None] = []

    def app(environ, start_response):
        seen.append(seconds_left())
        start_response("204 No Content", [])
        return [b""]

    wrapped = RequestWaitBudget(app, 1.5)
    for _ in range(2):
        wrapped({}, lambda *args: None)
    assert all(left is not None and 0 < left <= 1.5 for left in seen)
    assert seconds_left() is None
    RequestWaitBudget(app, 0)({}, lambda *args: None)  # 0: no budget
    assert seen[-1] is None


def test_every_redis_client_has_the_one_timeout():
    app = create_app(
        {
            # Never connected to (nothing listens on port 9): the settings are all it reads.
            "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://postgres@127.0.0.1:9/unused",
            "SECRET_KEY": "frozen-backends",
            "REDIS_URL": "redis://127.0.0.1:9/0",
            "REDIS_TIMEOUT_S": "0.4",
        }
    )
    assert app.config["RATELIMIT_STORAGE_OPTIONS"] == {
        "socket_timeout": 0.4,
        "socket_connect_timeout": 0.4,
    }
    transport = app.extensions["celery"].conf.broker_transport_options
    assert (transport["socket_timeout"], transport["socket_connect_timeout"]) == (0.4, 0.4)
    assert transport["max_retries"] == 0  # one attempt per use, not seconds of retries
