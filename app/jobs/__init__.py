"""Jobs: work that must commit in steps, run only by the worker and the command line.

A use case (``app.services``) is one transaction that its caller commits once. Some work cannot
be: a sync or a delivery waits on another company's server and must hold no transaction while
it does; a sweep or a purge is many independent pieces, each kept when a later one fails. Such
work is a job, here, and commits its own steps by calling services for each of them:

- ``outbox``: one handler on one outbox event (the reads ended before the handler's server is
  waited on, the outcome recorded after);
- ``webhooks``: the outbox's webhook handler (one delivery per subscription) and one attempt of
  one delivery;
- ``calendars``: syncing every connection or one with its follow-up, writing the bookings made
  before a connection into it, keeping its push channels, testing it;
- ``reminders``: the reminders that are due, one booking at a time;
- ``accounts``: a password-reset link made and mailed;
- ``retention``: what the outbox and the mail log keep, deleted in batches.

Services never import a job (an import contract), and neither do the web's entry points (the
API, the dashboard, the attendee's page, the push endpoints): a web request never commits in
steps. ``tests/conventions/test_transaction_owners.py`` fails for any ``commit`` under
``app/services``.
"""
