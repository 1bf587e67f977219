"""Who hears about booking events, per application: the in-process subscribers, the outbox
handlers and the webhook dispatchers, kept on the Flask app.

They used to be module globals, shared by every app a process builds (the test suite builds one
per test) and patched by tests. Now each app carries one ``IntegrationRegistry`` in
``app.extensions["calendar_events"]``, filled in one place: ``create_app`` (the metrics
subscriber and the outbox handlers) and ``celery_init_app`` (the worker enqueueing). The
services reach it through ``current_app`` when they run (``app_registry()``), so two apps in
one process never see each other's listeners, and a test registers on its own app.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flask import Flask, current_app

if TYPE_CHECKING:
    from app.services.integrations.events import BookingEvent
    from app.services.integrations.outbox import Delivery

EXTENSION = "calendar_events"

# Told of every committed booking event (with its outbox row id), in the committing process.
Subscriber = Callable[["BookingEvent"], Any]
# Does one outbox handler's work on one event: (the delivery, now).
Handler = Callable[["Delivery", datetime], None]
# Hands a planned webhook attempt to the worker: (webhook delivery id, when).
Dispatcher = Callable[[int, datetime], None]
# Hands a task to the worker after a commit (``calendars.freshness``): (task name, its
# arguments, seconds it is to wait).
TaskDispatcher = Callable[[str, list[Any], float], None]


@dataclass(eq=False)
class IntegrationRegistry:
    """One app's listeners. Order is kept: subscribers are told, and handlers are offered an
    event, in the order they were registered."""

    subscribers: list[Subscriber] = field(default_factory=list)
    handlers: dict[str, Handler] = field(default_factory=dict)
    # The event kinds each handler takes (absent: every kind).
    handler_kinds: dict[str, frozenset[str]] = field(default_factory=dict)
    dispatchers: list[Dispatcher] = field(default_factory=list)
    task_dispatchers: list[TaskDispatcher] = field(default_factory=list)

    def subscribe(self, subscriber: Subscriber) -> Subscriber:
        """Tell ``subscriber`` of every booking event (once, however often it is registered);
        returns it, so it can be used as a decorator."""
        if subscriber not in self.subscribers:
            self.subscribers.append(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)

    def register_handler(
        self, name: str, handler: Handler, kinds: frozenset[str] | None = None
    ) -> None:
        """Run ``handler`` on the outbox events of ``kinds`` (None: every kind) under
        ``name``, the key of its delivery records: a stable name, since records of past events
        carry it. An event of another kind is never offered to it, waits for nothing of it,
        and is delivered without a record of it."""
        self.handlers[name] = handler
        if kinds is None:
            self.handler_kinds.pop(name, None)
        else:
            self.handler_kinds[name] = kinds

    def unregister_handler(self, name: str) -> None:
        self.handlers.pop(name, None)
        self.handler_kinds.pop(name, None)

    def takes(self, name: str, kind: str) -> bool:
        """Whether handler ``name`` is registered and takes events of ``kind``."""
        if name not in self.handlers:
            return False
        kinds = self.handler_kinds.get(name)
        return kinds is None or kind in kinds

    def handlers_of(self, kind: str) -> list[str]:
        """The names of the handlers that take events of ``kind``, in registration order."""
        return [name for name in self.handlers if self.takes(name, kind)]

    def set_dispatcher(self, dispatcher: Dispatcher | None) -> None:
        """How webhook attempts are enqueued (None: attempts wait for the sweep)."""
        self.dispatchers[:] = [dispatcher] if dispatcher else []

    def set_task_dispatcher(self, dispatcher: TaskDispatcher | None) -> None:
        """How tasks asked for in a transaction are enqueued (a connection's sync or test;
        None: a sync waits for a worker's start or the poll to hand it over)."""
        self.task_dispatchers[:] = [dispatcher] if dispatcher else []


def init_registry(app: Flask) -> IntegrationRegistry:
    """``app``'s registry, created empty on first call (``create_app`` and ``celery_init_app``
    both call it, in either order)."""
    registry = app.extensions.get(EXTENSION)
    if registry is None:
        registry = app.extensions[EXTENSION] = IntegrationRegistry()
    return registry


def app_registry(app: Flask | None = None) -> IntegrationRegistry:
    """The registry of ``app``, else of the current app. An app not built by ``create_app``
    has none: that is a wiring mistake, said as such rather than events silently unheard."""
    target = app if app is not None else current_app
    try:
        return target.extensions[EXTENSION]
    except KeyError:
        raise RuntimeError(
            f"app {target.name!r} has no {EXTENSION!r} registry: build it with create_app "
            "(or call init_registry)"
        ) from None
