"""Asking the connected calendars at the moment of a write: is this time still free there?

Stored busy time is as fresh as the last sync or notification. A person who adds an event in
their Google calendar and, seconds later, sees an agent book over it has been double-booked all
the same. So a create, a reschedule and a hold ask every connected calendar of the host whose
time they claim (the event type's) about the write's time (buffers included) before they take
the calendar's lock, those of the kinds that answer live (``providers``' capability table):

- Google: ``events.list`` for that window; Microsoft: ``calendarView`` for it; CalDAV: one
  ``calendar-query`` REPORT with a time range (RFC 4791) on each checked calendar. Every kind
  lists events rather than bare busy intervals (Google's freeBusy), so the service's own
  written-back bookings are told apart as the sync tells them. Feeds are not asked: a feed is
  one file of every event, slow to fetch and often cached by its server for minutes, so asking
  it would cost a write seconds and tell little the last poll did not;
- all calendars are asked at once, in threads, under one deadline
  (``CALENDAR_LIVE_CHECK_TIMEOUT_S``, default 1.5 s); each request's own timeout is that
  deadline, so an abandoned question ends soon after;
- what they answer is stored as the sync stores it (``sync.record_seen``): the write meets the
  new busy time under the lock like any other (``external_busy`` with suggestions), and
  availability stops offering it;
- a calendar that does not answer in time, or fails: under ``best_effort`` (the default) the
  write goes on against the stored busy time, and the miss is counted; under ``strict`` the
  write is refused (``CalendarUnreachable``, 503 with ``Retry-After``); ``off`` asks nothing.

A write is planned, asked, then applied (``app.services.bookings.planned``): the plan reads
the question (``plan_live_check``) in a transaction the entry point then ends; the calendars
are asked (``ask``) with no transaction, no lock and no database connection held; the apply
stores what they answered (``record_answers``) under the calendar's lock, in the write's one
transaction, and claims the time. A write refused there still keeps what was seen: the entry
point stores it in a transaction of its own (``app.unit_of_work``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from flask import Flask, current_app
from sqlalchemy import select, true

from app.config import settings
from app.counters import LIVE_CHECK_SECONDS, LIVE_CHECKS
from app.extensions import db
from app.models import (
    BlockedTime,
    BlockedTimeSource,
    CalendarConnection,
    CalendarSettings,
    ConnectedCalendar,
)
from app.scheduling.intervals import Interval
from app.scheduling.timezones import zone
from app.services.common.errors import ErrorCode, ServiceError
from app.services.common.locking import lock_calendar
from app.services.integrations.calendars.access import connection_access
from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.providers import kinds_answering_live, live_answerer
from app.services.integrations.calendars.providers.base import ItemRead
from app.services.integrations.calendars.sync import record_seen

log = logging.getLogger(__name__)

# Questions asked at once, however many calendars a sub account has connected.
MOST_AT_ONCE = 8
# What a refused write's client is told to wait (seconds) under ``strict``.
RETRY_AFTER_SECONDS = 5


class LiveCheckMode(StrEnum):
    BEST_EFFORT = "best_effort"
    STRICT = "strict"
    OFF = "off"


Outcome = Literal["clear", "busy", "unanswered"]


class CalendarUnreachable(ServiceError):
    """``strict``: a connected calendar did not answer about the time in time, so the write
    cannot be known not to double-book. Worth retrying after ``retry_after`` seconds."""

    status_code = 503
    code = ErrorCode.CALENDAR_UNREACHABLE
    retry_after = RETRY_AFTER_SECONDS

    def __init__(self, names: list[str]) -> None:
        listed = ", ".join(repr(name) for name in names)
        super().__init__(
            f"The connected calendar {listed} did not answer in time; try again shortly"
            if len(names) == 1
            else f"The connected calendars {listed} did not answer in time; try again shortly"
        )


@dataclass(frozen=True)
class LiveCheck:
    """What asking the connected calendars found. ``outcome``: ``clear`` (every calendar
    answered, none busy), ``busy`` (one or more is busy: stored, so the write's claim refuses
    it), ``unanswered`` (one or more did not answer; ``unanswered`` names them)."""

    outcome: Outcome
    unanswered: tuple[str, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True)
class _Question:
    connection_id: int
    name: str
    kind: str
    access: Any = field(repr=False)
    problem: CalendarSyncError | None
    remote_id: str | None


def live_check_mode() -> LiveCheckMode:
    """``CALENDAR_LIVE_CHECK``."""
    return LiveCheckMode(settings().calendar_live_check)


def live_check_timeout() -> float:
    """The one deadline of a live check (``CALENDAR_LIVE_CHECK_TIMEOUT_S``)."""
    return settings().calendar_live_check_timeout_s


@dataclass(frozen=True)
class LiveQuestion:
    """What a write will ask the connected calendars, read in its plan (the secrets decrypted
    there): every checked calendar of the sub account's connections of a kind asked live, about
    ``window`` (the occupied interval: buffers included)."""

    sub_account_id: int
    window: Interval
    mode: LiveCheckMode
    deadline: float
    timezone: str
    calendars: tuple[_Question, ...]


@dataclass(frozen=True)
class LiveAnswer:
    """What the calendars answered in time (``answers``: per calendar, its remote id and the
    items it lists in the window), and the names of those that did not (``unanswered``)."""

    question: LiveQuestion
    answers: tuple[tuple[_Question, str, list[ItemRead]], ...]
    unanswered: tuple[str, ...]
    seconds: float


def plan_live_check(
    sub_account_id: int, window: Interval, hosts: Collection[int] | None = None
) -> LiveQuestion | None:
    """The question a write about ``window`` asks the calendars of ``hosts`` (the hosts whose
    time it may claim: a round-robin write's candidates are asked at once, under the one
    deadline; None: every host's), or None when there is nobody to ask (the check is
    off, or no such calendar is connected that answers live). Reads in the caller's
    transaction: part of the write's plan."""
    mode = live_check_mode()
    if mode is LiveCheckMode.OFF:
        return None
    deadline = live_check_timeout()
    calendars, timezone = _questions(sub_account_id, deadline, hosts)
    if not calendars:
        return None
    return LiveQuestion(sub_account_id, window, mode, deadline, timezone, tuple(calendars))


def ask(question: LiveQuestion) -> LiveAnswer:
    """Ask every calendar of ``question`` at once, under its one deadline; under ``strict``,
    raise ``CalendarUnreachable`` for one that did not answer. Touches no database, and refuses
    to run inside a transaction: a write waiting on another company's server must hold neither
    a connection nor a lock (the entry point ends the plan's transaction first)."""
    if db.session().in_transaction():
        raise RuntimeError("the live check runs between a write's plan and its apply")
    started = time.monotonic()
    answers, unanswered = _ask_all(
        list(question.calendars), question.window, question.timezone, question.deadline
    )
    answer = LiveAnswer(question, tuple(answers), tuple(unanswered), time.monotonic() - started)
    if unanswered:
        log.warning(
            "live check of sub account %s: no answer in time from %s",
            question.sub_account_id,
            ", ".join(unanswered),
        )
        if question.mode is LiveCheckMode.STRICT:
            _count("unanswered", answer.seconds)
            raise CalendarUnreachable(unanswered)
    return answer


def record_answers(answer: LiveAnswer) -> LiveCheck:
    """Store what the calendars answered, as the sync stores it (``sync.record_seen``), in the
    caller's transaction, under the calendar's lock (taken here if the caller has not: it is
    the write's own); the claim that follows meets it like any busy time. Flushes."""
    question = answer.question
    window = question.window
    if any(items for _, _, items in answer.answers) or _stored_in(question.sub_account_id, window):
        lock_calendar(question.sub_account_id)
        for calendar, remote_id, items in answer.answers:
            record_seen(calendar.connection_id, remote_id, window, items)
        busy = _stored_in(question.sub_account_id, window)
    else:
        busy = False  # nothing seen and nothing stored there: nothing to write
    outcome: Outcome = "unanswered" if answer.unanswered else "busy" if busy else "clear"
    _count(outcome, answer.seconds)
    return LiveCheck(outcome, answer.unanswered, answer.seconds)


def _count(outcome: Outcome, seconds: float) -> None:
    LIVE_CHECKS.labels(outcome).inc()
    LIVE_CHECK_SECONDS.observe(seconds)


def _questions(
    sub_account_id: int, timeout: float, hosts: Collection[int] | None = None
) -> tuple[list[_Question], str]:
    """One question per checked calendar of every active connection of a kind asked live
    (the secrets decrypted here). Read in the caller's session and transaction, which then
    ends: a second pooled connection for each write would halve the writes a pool serves."""
    connections = db.session.scalars(
        select(CalendarConnection)
        .where(
            CalendarConnection.sub_account_id == sub_account_id,
            CalendarConnection.active.is_(True),
            CalendarConnection.kind.in_(kinds_answering_live()),
            true() if hosts is None else CalendarConnection.host_id.in_(sorted(hosts)),
        )
        .order_by(CalendarConnection.id)
    ).all()
    if not connections:
        return [], "UTC"
    settings = db.session.get(CalendarSettings, sub_account_id)
    remote_ids: dict[int, list[str | None]] = {}
    for connection_id, remote_id in db.session.execute(
        select(ConnectedCalendar.calendar_connection_id, ConnectedCalendar.remote_id)
        .where(ConnectedCalendar.calendar_connection_id.in_([c.id for c in connections]))
        .order_by(ConnectedCalendar.id)
    ):
        remote_ids.setdefault(connection_id, []).append(remote_id)
    questions = []
    for connection in connections:
        access, problem = connection_access(connection, timeout)
        questions += [
            _Question(connection.id, connection.name, connection.kind, access, problem, rid)
            for rid in remote_ids.get(connection.id) or [None]
        ]
    return questions, settings.timezone if settings is not None else "UTC"


def _ask_all(
    questions: list[_Question], window: Interval, timezone: str, deadline: float
) -> tuple[list[tuple[_Question, str, list[ItemRead]]], list[str]]:
    """Every question at once; the answers that came within ``deadline``, and the names of
    the connections that did not answer (in time, or at all)."""
    # current_app is typed as the Flask app it stands for; it is a proxy (as Flask's own code
    # says with the same ignore).
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    tz = zone(timezone)
    pool = ThreadPoolExecutor(
        max_workers=min(MOST_AT_ONCE, len(questions)), thread_name_prefix="live-check"
    )
    try:
        futures: dict[Future, _Question] = {
            pool.submit(_in_app(app, _ask), question, window, tz): question
            for question in questions
        }
        done, _ = wait(futures, timeout=deadline)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    answers, unanswered = [], []
    for future, question in futures.items():
        if future in done and future.exception() is None:
            remote_id, items = future.result()
            answers.append((question, remote_id, items))
        else:
            if future in done:
                log.warning(
                    "live check of connection %s failed: %s",
                    question.connection_id,
                    getattr(future.exception(), "message", type(future.exception()).__name__),
                )
            if question.name not in unanswered:
                unanswered.append(question.name)
    return answers, unanswered


def _in_app(app: Flask, work: Callable[..., Any]) -> Callable[..., Any]:
    """``work`` run in an app context of its own (a thread has none): an OAuth provider's
    token may need refreshing, which reads the configuration and saves the new grant."""

    def run(*args: Any) -> Any:
        with app.app_context():
            try:
                return work(*args)
            finally:
                db.session.remove()

    return run


def _ask(question: _Question, window: Interval, tz: Any) -> tuple[str, list[ItemRead]]:
    if question.problem is not None:
        raise question.problem
    answerer = live_answerer(question.kind)
    assert answerer is not None  # only kinds that answer live are asked (``_questions``)
    return answerer.items_in(question.access, question.remote_id, window, tz)


def _stored_in(sub_account_id: int, window: Interval) -> bool:
    """Whether any connected calendar's busy time is stored in ``window``."""
    return (
        db.session.scalar(
            select(BlockedTime.id)
            .where(
                BlockedTime.sub_account_id == sub_account_id,
                BlockedTime.source == BlockedTimeSource.EXTERNAL,
                BlockedTime.start_at < window.end,
                BlockedTime.end_at > window.start,
            )
            .limit(1)
        )
        is not None
    )
