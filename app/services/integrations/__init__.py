"""Telling and hearing from the outside world: domain events written in the write's
transaction (``events``), recording their booking in the events' own versioned schema
(``event_schema``, never the API's shapes), and delivered to their handlers through the outbox
(``outbox``); who listens is the app's own (``registry``, on the Flask app);
connected calendars, their sync and write-back (``calendars``); booking mail
(``notifications``); webhooks (``webhooks``); a booking as iCalendar (``ical``). Calls
``common`` and reads bookings; never writes them."""
