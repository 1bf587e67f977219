"""Every test whose dates follow today's date is marked ``date_sensitive``, so that ``make
test`` also runs it on the shifted clocks (``--clock``, ``tests/conftest.py``).

The check reads every module of ``tests/`` (with ``ast``; nothing is imported or run):

* A *clock read* is a call of ``….now()``, ``….utcnow()`` or ``….today()`` (``datetime``,
  ``date``, ``app.models.types.utcnow``, SQL's ``func.now()``), of a name imported as ``now``,
  ``utcnow`` or ``today`` from outside ``tests/``, or of ``time.time()`` / ``time.time_ns()``
  (and ``time.localtime()``, ``gmtime()``, ``ctime()``, ``asctime()``, ``strftime(format)``
  without an instant). ``time.monotonic()`` and ``perf_counter()`` only measure durations and
  are not clock reads.
* A module-level name of ``tests/`` *follows the clock* when its definition reads the clock or
  uses a name that does: a helper (``factories.next_monday``), a constant
  (``MONDAY = next_monday()``), a fixture; through imports across modules and through the
  fixtures a function requests (parameters, ``usefixtures``), in its module or ``conftest.py``.
* A test follows the clock the same way, or through its module's ``pytestmark`` or an
  ``autouse`` fixture.

Every test that follows the clock must carry the marker: its module's ``pytestmark``, its
class's marks or its own decorator. A clock read that cannot make a test depend on the date (a
duration, a stamp compared only with "now", a server handed the tests' clock) is listed in
``ALLOWED`` under its place, ``module.py::top-level name``, with the reason; the reads there
then do not count, while every other read in that module, and every use of a helper or
constant that follows the clock (``next_monday``, ``MONDAY``), still does. An entry that
changes nothing (its place no longer reads the clock, or only marked tests depend on it) fails
the check until it is removed.

What it cannot see: a test that leaves "now" to the server (say, the availability of the
default range, which starts today) without reading the clock itself; relative imports (the
suite has none).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
MARKER = "date_sensitive"

# Places whose clock reads cannot make a test depend on the date, each with the reason.
RELATIVE = (
    "instants a duration before or after now, compared only with now or with each other (an "
    "age, a lag, a due retry, an expiry, a finished booking, a stamp): the same on any day"
)
AHEAD = (
    "a booking, hold or calendar event a day or a few ahead of now, stored as a row or on an "
    "always-open calendar, and only stored, listed or deleted as an instant: the same on any day"
)
ALLOWED: dict[str, str] = {
    "test_round_robin_fairness.py::month_ahead": "picks a month of the test's own from "
    "today (the 3rd of next month); every booking is made with that month's clock, open "
    "around the clock, so no date changes what is booked or counted",
    "test_polled_calendars.py::test_an_event_added_just_after_the_first_read_is_busy_within_"
    "one_interval": "measures how long after the first read the event was seen (a duration); "
    "the event is a daily series, busy on any date",
    "test_slow_feeds.py::Setup": "asks for a sync now, as a person's Sync now does; the feeds' "
    "events are daily series busy on any date",
    "servers.py::on_the_tests_clock": "reads the clock only to start a server or worker on the "
    "tests' clock (its offset from the real one)",
    "test_dashboard_access.py::test_a_session_expires": "travels a duration (the session's "
    "lifetime) past now",
    "test_dashboard_team.py::test_an_invitation_link_expires_after_seven_days": "travels a "
    "duration (the invitation's lifetime) past now",
    "test_dashboard_api_keys.py::test_an_expiry_is_read_in_the_sub_accounts_timezone": "1 June "
    "of next year: ahead on any day, and always in New York's summer time",
    "test_dashboard_api_keys.py::test_an_expiry_date_alone_lets_the_key_work_through_that_day": (
        "1 June of next year: ahead on any day, and always in New York's summer time"
    ),
    "test_event_type_and_availability_services.py::test_blocked_time_refusals_name_both_ends": (
        "today's date is only a value of the wrong type"
    ),
    "test_rate_limit.py::test_every_api_response_carries_the_limit_headers": "the reset header "
    "is an epoch second, compared with the clock's",
    "test_dashboard_settings.py::test_a_new_timezone_is_explained_and_used_to_show_times": AHEAD
    + "; shown in Tokyo time, which has no DST",
    "test_frozen_backends.py::SteadyLoad": AHEAD,
    "test_broker_outages.py::BookingLoad": AHEAD,
    "factories.py::run_queued_sync": "a sync as the worker runs it, now: what it reads lies "
    "around now, placed by the tests relative to it",
    "test_push.py::Connected": RELATIVE,
    "test_push.py::test_microsoft_subscriptions_are_renewed_a_day_before_they_expire": RELATIVE,
    "test_push.py::test_the_upkeep_takes_a_connection_with_a_calendar_that_has_no_channel": RELATIVE,
    "test_push.py::test_the_upkeep_takes_a_switched_off_connection_that_still_has_channels": (
        RELATIVE
    ),
    "test_push.py::test_with_push_switched_off_the_upkeep_takes_every_connection_with_channels": (
        RELATIVE
    ),
    "test_procfile.py::race_for_slots": AHEAD
    + " (the Procfile's processes keep the real clock, so it cannot run on a shifted one)",
    **dict.fromkeys(
        [
            "test_booking_lifecycle.py::now",
            "test_connections_cli.py::test_list_shows_sync_and_write_back_health",
            "test_dashboard_notifications.py::kept_mail",
            "test_dashboard_notifications.py::test_a_disabled_subscription_is_shown_so_and_can_be_enabled",
            "test_health.py::worker_seen",
            "test_health.py::test_statusz_is_degraded_when_an_outbox_event_waits_longer_than_the_limit",
            "test_health.py::test_statusz_is_degraded_when_a_worker_beats_but_takes_no_task_while_work_waits",
            "test_health.py::test_statusz_is_ok_when_the_worker_took_a_task_recently_while_work_waits",
            "test_health.py::test_statusz_is_ok_when_a_worker_that_took_no_task_has_no_work_waiting",
            "test_health.py::test_statusz_is_ok_with_a_fresh_outbox_event_waiting",
            "test_key_cache.py::test_a_kept_key_expires_at_its_instant",
            "test_metrics.py::test_workers_seen_and_redis_up_are_gauges_read_at_scrape_time",
            "test_worker.py::finished_confirmed_booking",
            "test_worker.py::test_the_sweep_delivers_events_whose_dispatch_was_lost",
            "test_worker.py::test_the_worker_purges_expired_holds",
            "test_worker.py::test_beat_has_the_worker_purge_what_is_past_the_retention",
            "test_worker.py::test_beat_s_channel_upkeep_renews_each_due_connection_in_a_task_of_its_own",
            "test_existing_bookings_written.py::test_a_booking_another_writer_is_writing_is_left_to_the_next_run",
            "test_worker.py::test_the_heartbeat_says_when_the_worker_last_took_a_task",
        ],
        RELATIVE,
    ),
    **dict.fromkeys(
        [
            "test_connections_cli.py::test_remove_deletes_the_connection_and_its_busy_time",
            "test_dashboard_connections.py::test_a_calendar_chosen_from_the_test_is_used",
            "test_dashboard_connections.py::test_sync_now_is_read_by_the_worker_and_its_page_shows_the_result",
            "test_dashboard_connections.py::test_removing_deletes_the_connection_and_its_busy_time",
            "test_dashboard_contacts.py::test_a_contacts_page_lists_their_bookings",
            "test_dashboard_contacts.py::test_deleting_a_contact_keeps_their_bookings",
            "test_health.py::record_event_at",
            "test_limiter_storage_faults.py::test_a_frozen_rate_limit_store_never_costs_a_booking",
            "test_worker.py::test_a_committed_booking_event_reaches_the_worker",
            "test_worker_messages.py::test_a_webhook_is_retried_through_the_worker_until_it_is_taken",
            "test_worker_messages.py::test_a_worker_killed_mid_delivery_delivers_exactly_once_more",
        ],
        AHEAD,
    ),
}

CLOCK_METHODS = frozenset({"now", "utcnow", "today"})
TIME_READS = frozenset({"time", "time_ns"})
# time's functions that read the clock when called without an instant (positional args).
TIME_READS_WITHOUT_INSTANT = {"localtime": 0, "gmtime": 0, "ctime": 0, "asctime": 0, "strftime": 1}


@dataclass
class Unit:
    """A place that may read the clock: a module-level definition, or a test."""

    place: str  # "module.py::name"
    nodes: list[ast.AST]
    params: list[str] = field(default_factory=list)  # fixtures it may request
    marked: bool = False
    reads: list[str] | None = None  # its clock reads, once found
    uses: list[tuple[str, str]] | None = None  # the module-level names it uses, once found


@dataclass
class Module:
    name: str  # "tests.factories"
    file: str  # "factories.py"
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)  # alias -> dotted target
    definitions: dict[str, Unit] = field(default_factory=dict)  # module-level names
    fixtures: dict[str, str] = field(default_factory=dict)  # fixture name -> definition
    autouse: list[str] = field(default_factory=list)  # definitions of autouse fixtures
    tests: list[Unit] = field(default_factory=list)
    pytestmark: list[ast.AST] = field(default_factory=list)
    marked: bool = False


def mentions_marker(nodes: Iterable[ast.AST]) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr == MARKER
        for root in nodes
        for node in ast.walk(root)
    )


def top_level(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements, with those inside top-level ``if``/``try``/``with`` blocks."""
    for statement in statements:
        if isinstance(statement, ast.If | ast.Try | ast.With):
            blocks = [statement.body, getattr(statement, "orelse", [])]
            if isinstance(statement, ast.Try):
                blocks += [statement.finalbody, *(h.body for h in statement.handlers)]
            for block in blocks:
                yield from top_level(block)
        else:
            yield statement


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    arguments = function.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    for decorator in function.decorator_list:  # @pytest.mark.usefixtures("name", …)
        for node in ast.walk(decorator):
            if isinstance(node, ast.Call) and dotted(node.func).endswith("usefixtures"):
                names += [a.value for a in node.args if isinstance(a, ast.Constant)]
    return names


def fixture_decorator(function: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if dotted(target).endswith("fixture"):
            return decorator
    return None


def keyword(call: ast.expr, name: str) -> ast.expr | None:
    if isinstance(call, ast.Call):
        for item in call.keywords:
            if item.arg == name:
                return item.value
    return None


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of attributes on a name, else ``""``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def read_module(path: Path, package: str) -> Module:
    module = Module(f"{package}.{path.stem}", path.name, ast.parse(path.read_text(), str(path)))
    for statement in top_level(module.tree.body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    module.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    module.imports[head] = head
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            for alias in statement.names:
                module.imports[alias.asname or alias.name] = f"{statement.module}.{alias.name}"
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            unit = Unit(f"{path.name}::{statement.name}", [statement], parameters(statement))
            unit.marked = mentions_marker(statement.decorator_list)
            module.definitions[statement.name] = unit
            if decorator := fixture_decorator(statement):
                name = keyword(decorator, "name")
                module.fixtures[name.value if name is not None else statement.name] = statement.name
                autouse = keyword(decorator, "autouse")
                if isinstance(autouse, ast.Constant) and autouse.value is True:
                    module.autouse.append(statement.name)
            elif statement.name.startswith("test"):
                module.tests.append(unit)
        elif isinstance(statement, ast.ClassDef):
            read_class(module, path, statement)
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        unit = module.definitions.setdefault(
                            node.id, Unit(f"{path.name}::{node.id}", [])
                        )
                        unit.nodes.append(statement)
                        if node.id == "pytestmark":
                            module.pytestmark.append(statement)
    module.marked = mentions_marker(module.pytestmark)
    return module


def read_class(module: Module, path: Path, statement: ast.ClassDef) -> None:
    """A class is one definition; in a ``Test…`` class each ``test…`` method is a test too,
    with the class's statements other than methods (its ``pytestmark``, say)."""
    module.definitions[statement.name] = Unit(f"{path.name}::{statement.name}", [statement])
    if not statement.name.startswith("Test"):
        return
    shared = [
        s for s in statement.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    class_marked = mentions_marker([*statement.decorator_list, *shared])
    for method in statement.body:
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.name.startswith(
            "test"
        ):
            unit = Unit(
                f"{path.name}::{statement.name}.{method.name}",
                [method, *shared, *statement.decorator_list],
                parameters(method),
            )
            unit.marked = class_marked or mentions_marker(method.decorator_list)
            module.tests.append(unit)


def read_folder(folder: Path) -> dict[str, Module]:
    """Every module of ``folder`` and its subpackages (``folder`` is a package: its name, then
    the subpackage's, prefixes each module's name, as in ``tests.api.test_holds``)."""
    modules = (
        read_module(path, ".".join((folder.name, *path.parent.relative_to(folder).parts)))
        for path in sorted(folder.rglob("*.py"))
        if "vendor" not in path.relative_to(folder).parts
    )
    return {module.name: module for module in modules}


class Checker:
    """Which tests follow the clock, given the places whose reads are allowed."""

    def __init__(self, modules: Mapping[str, Module], allowed: Mapping[str, str]) -> None:
        self.modules = modules
        self.allowed = allowed
        self.conftest = next((m for m in modules.values() if m.file == "conftest.py"), None)
        # (module name, definition) -> why it follows the clock
        self.follows: dict[tuple[str, str], str] = {}
        changed = True
        while changed:
            changed = False
            for module in modules.values():
                for name, unit in module.definitions.items():
                    if (module.name, name) not in self.follows and (
                        why := self.reason(module, unit)
                    ):
                        self.follows[(module.name, name)] = why
                        changed = True

    # Reading the code
    def resolve(self, module: Module, node: ast.AST) -> tuple[str, str] | None:
        """The module-level name of the folder a name or attribute chain stands for."""
        chain = dotted(node)
        if not chain:
            return None
        head, *rest = chain.split(".")
        if head in module.definitions and not rest:
            return module.name, head
        if head not in module.imports:
            return None
        *target, name = [*module.imports[head].split("."), *rest]
        return (".".join(target), name) if ".".join(target) in self.modules else None

    def imported(self, module: Module, node: ast.AST) -> str:
        """The dotted target of an imported name or chain (``time.time``), else ``""``."""
        head, *rest = dotted(node).split(".")
        if head in module.definitions or head not in module.imports:
            return ""
        return ".".join([module.imports[head], *rest])

    def clock_read(self, module: Module, call: ast.Call) -> str:
        function = call.func
        if isinstance(function, ast.Attribute) and function.attr in CLOCK_METHODS:
            return f"{dotted(function) or '….' + function.attr}()"
        target = self.imported(module, function)
        if not target or target.split(".")[0] == module.name.split(".")[0]:
            return ""  # not imported, or the folder's own (followed as a use)
        if target.rsplit(".", 1)[-1] in CLOCK_METHODS:
            return f"{dotted(function)}() ({target})"
        if target in {f"time.{name}" for name in TIME_READS}:
            return f"{dotted(function)}()"
        for name, instant_at in TIME_READS_WITHOUT_INSTANT.items():
            if target == f"time.{name}" and len(call.args) <= instant_at and not call.keywords:
                return f"{dotted(function)}()"
        return ""

    def reads(self, module: Module, unit: Unit) -> list[str]:
        """The clock reads written in a unit."""
        if unit.reads is None:
            unit.reads = [
                f"{read} (line {node.lineno})"
                for root in unit.nodes
                for node in ast.walk(root)
                if isinstance(node, ast.Call) and (read := self.clock_read(module, node))
            ]
        return unit.reads

    def uses(self, module: Module, unit: Unit) -> list[tuple[str, str]]:
        """The module-level names of the folder a unit uses, fixtures it requests included."""
        if unit.uses is None:
            used = [
                found
                for root in unit.nodes
                for node in ast.walk(root)
                if isinstance(node, ast.Name | ast.Attribute)
                and (found := self.resolve(module, node))
            ]
            for name in unit.params:
                owner = next(
                    (m for m in (module, self.conftest) if m is not None and name in m.fixtures),
                    None,
                )
                if owner is not None:
                    used.append((owner.name, owner.fixtures[name]))
                elif found := self.resolve(module, ast.Name(id=name)):  # an imported fixture
                    used.append(found)
            unit.uses = used
        return unit.uses

    # The verdicts
    def reason(self, module: Module, unit: Unit) -> str | None:
        """Why a unit follows the clock, or None."""
        if (reads := self.reads(module, unit)) and unit.place not in self.allowed:
            return f"reads the clock: {', '.join(reads)}"
        itself = (module.name, unit.place.split("::")[1])
        for used in self.uses(module, unit):
            if used in self.follows and used != itself:
                return f"uses {used[0].split('.')[-1]}.{used[1]}, which {self.follows[used]}"
        return None

    def test_reason(self, module: Module, test: Unit) -> str | None:
        if why := self.reason(module, test):
            return why
        if (module.name, "pytestmark") in self.follows:
            return f"its module's pytestmark {self.follows[(module.name, 'pytestmark')]}"
        for owner in (module, self.conftest):
            for fixture in owner.autouse if owner is not None else ():
                if (owner.name, fixture) in self.follows:
                    return f"autouse fixture {fixture} {self.follows[(owner.name, fixture)]}"
        return None

    def unmarked(self) -> list[str]:
        """The tests that follow the clock without the marker, each with why."""
        return [
            f"{test.place}: {why}"
            for module in self.modules.values()
            if not module.marked
            for test in module.tests
            if not test.marked and (why := self.test_reason(module, test))
        ]


def unneeded_allowances(modules: Mapping[str, Module], allowed: Mapping[str, str]) -> list[str]:
    """The allowed places without which no more tests would be flagged (they read the clock
    no longer, or only tests that are marked anyway depend on them)."""
    flagged = set(Checker(modules, allowed).unmarked())
    return [
        place
        for place in allowed
        if set(Checker(modules, {k: v for k, v in allowed.items() if k != place}).unmarked())
        <= flagged
    ]


def test_every_test_that_follows_todays_date_is_marked_date_sensitive():
    unmarked = Checker(read_folder(TESTS), ALLOWED).unmarked()
    assert not unmarked, (
        f"{len(unmarked)} tests follow today's date without @pytest.mark.{MARKER} (mark them, "
        "or their module with pytestmark; or, if the read cannot make them depend on the "
        "date, allow its place in ALLOWED with the reason):\n  " + "\n  ".join(unmarked)
    )


def test_every_allowance_is_still_needed():
    assert unneeded_allowances(read_folder(TESTS), ALLOWED) == []


# The check on sample modules
SAMPLE_HELPERS = """
    from datetime import date, datetime, timedelta

    import pytest

    def next_monday():
        today = datetime.now().date()
        return today + timedelta(days=7 - today.weekday())

    def monday_at(hour):
        return (next_monday(), hour)

    def fixed():
        return date(2031, 1, 6)

    @pytest.fixture
    def monday():
        return next_monday()
"""

SAMPLE_TESTS = """
    import time
    import pytest
    from app.models.types import utcnow
    from samples import helpers
    from samples.helpers import fixed, monday, monday_at

    MONDAY = helpers.next_monday()

    @pytest.fixture
    def now():
        return utcnow()

    @pytest.fixture
    def later(now):
        return now

    def test_constant():
        assert MONDAY

    def test_helper_of_a_helper():
        assert monday_at(10)

    def test_fixture_of_a_fixture(later):
        assert later

    def test_time_time():
        assert time.time()

    def test_imported_fixture(monday):
        assert monday

    def test_allowed_read():
        assert utcnow()

    def test_durations_and_fixed_dates():
        started = time.monotonic()
        assert fixed() and time.monotonic() >= started and time.gmtime(0)

    @pytest.mark.date_sensitive
    def test_marked():
        assert MONDAY and utcnow()

    class TestGrouped:
        def test_in_a_class(self):
            assert MONDAY
"""

SAMPLE_MARKED = """
    import pytest
    from samples.helpers import next_monday

    pytestmark = [pytest.mark.slow, pytest.mark.date_sensitive]

    def test_marked_by_the_module():
        assert next_monday()
"""


SAMPLE_PYTESTMARK = """
    import pytest
    from samples.helpers import next_monday

    pytestmark = pytest.mark.parametrize("day", [next_monday()])

    def test_parametrized_by_the_module(day):
        assert day
"""

SAMPLE_AUTOUSE = """
    from datetime import date
    import pytest

    @pytest.fixture(autouse=True)
    def today():
        return date.today()

    def test_under_an_autouse_fixture():
        pass
"""


def samples(tmp_path: Path) -> dict[str, Module]:
    folder = tmp_path / "samples"
    folder.mkdir()
    for name, text in (
        ("helpers", SAMPLE_HELPERS),
        ("test_sample", SAMPLE_TESTS),
        ("test_marked", SAMPLE_MARKED),
        ("test_pytestmark", SAMPLE_PYTESTMARK),
        ("test_autouse", SAMPLE_AUTOUSE),
    ):
        (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return read_folder(folder)


def test_the_check_finds_each_way_a_test_follows_the_clock_and_only_those(tmp_path):
    allowed = {"test_sample.py::test_allowed_read": "a stamp"}
    flagged = [line.split(": ", 1)[0] for line in Checker(samples(tmp_path), allowed).unmarked()]
    assert flagged == [
        "test_autouse.py::test_under_an_autouse_fixture",
        "test_pytestmark.py::test_parametrized_by_the_module",
        "test_sample.py::test_constant",
        "test_sample.py::test_helper_of_a_helper",
        "test_sample.py::test_fixture_of_a_fixture",
        "test_sample.py::test_time_time",
        "test_sample.py::test_imported_fixture",
        "test_sample.py::TestGrouped.test_in_a_class",
    ]


def test_the_check_says_why_a_test_follows_the_clock(tmp_path):
    reasons = dict(line.split(": ", 1) for line in Checker(samples(tmp_path), {}).unmarked())
    assert reasons["test_sample.py::test_constant"] == (
        "uses test_sample.MONDAY, which uses helpers.next_monday, which reads the clock: "
        "datetime.now() (line 7)"
    )
    assert reasons["test_sample.py::test_fixture_of_a_fixture"] == (
        "uses test_sample.later, which uses test_sample.now, which reads the clock: "
        "utcnow() (app.models.types.utcnow) (line 12)"
    )


def test_an_allowance_that_changes_nothing_is_reported(tmp_path):
    allowed = {
        "test_sample.py::test_allowed_read": "needed",
        "test_sample.py::test_constant": "no read of its own",
        "test_sample.py::test_marked": "marked anyway",
        "test_sample.py::test_missing": "no such test",
    }
    assert unneeded_allowances(samples(tmp_path), allowed) == [
        "test_sample.py::test_constant",
        "test_sample.py::test_marked",
        "test_sample.py::test_missing",
    ]


def test_every_module_about_dates_exists_and_has_date_sensitive_tests() -> None:
    """The shifted clocks run the date_sensitive tests of ``conftest.ABOUT_DATES``: a name
    there that is no module, or a module with none, would quietly run nothing again."""
    from tests.conftest import ABOUT_DATES

    found = {path.name: path for path in TESTS.rglob("test_*.py")}
    assert sorted(ABOUT_DATES - set(found)) == []
    assert [name for name in sorted(ABOUT_DATES) if MARKER not in found[name].read_text()] == []
