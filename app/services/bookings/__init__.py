"""Bookings and slot holds: the time rule as every write applies it (``time_claims``), creating,
moving and cancelling (``writes``), confirming, completing and no-shows (``lifecycle``),
reading (``queries``), holds (``holds``), the contacts attendees become (``contacts``) and the
dashboard's calendar window (``calendar_view``). Calls ``availability`` and ``common``, and
emits the domain events of ``integrations.events`` in the write's transaction."""
