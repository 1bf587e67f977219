"""Use cases, grouped by what they serve. Each public function is one use case; it flushes, and
the caller (view, task, job or CLI command) commits once at its boundary: no service commits
(a test reads the source). Work that must commit in steps is a job (``app.jobs``); a write
that asks the connected calendars is planned here and performed by its entry point
(``bookings.planned``, ``app.unit_of_work``).

- ``common``: what every area uses (errors, id and instant parsing, scoped lookups, the
  calendar's write lock, tokens, encryption of stored secrets).
- ``availability``: how a calendar can be booked: event types, availability profiles, blocked
  time, calendar settings, and the open time computed from them.
- ``bookings``: bookings and holds: the time rule as writes apply it, create, move, cancel,
  confirm and complete, reading them, contacts, the dashboard's calendar view.
- ``accounts``: agencies and their people: users and sessions, passwords, the team, API keys,
  provisioning, the demo workspace.
- ``integrations``: telling and hearing from the outside: domain events and the outbox,
  connected calendars (sync, write-back), booking mail, webhooks, iCalendar.
- ``health``: the checks behind ``/readyz`` and ``/statusz``.
- ``scheduling_inputs``: what bookings and availability both read (the event type with its
  hours, busy time, slot rules), one module both call.

Packages call ``common`` and the areas below them: bookings use availability and emit
integrations' events; accounts provision what the other areas own. Nothing here imports the
web, the worker or the command line (``pyproject.toml``'s import contract).
"""
