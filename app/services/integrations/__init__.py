"""Telling and hearing from the outside world: domain events written in the write's
transaction (``events``) and delivered to their handlers through the outbox (``outbox``);
connected calendars, their sync and write-back (``calendars``); booking mail
(``notifications``); webhooks (``webhooks``); a booking as iCalendar (``ical``). Calls
``common`` and reads bookings; never writes them."""
