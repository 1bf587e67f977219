"""How a sub account's calendar can be booked: event types (``event_types``), availability
profiles with weekly hours and date overrides (``profiles``), blocked time (``blocked_times``),
the calendar's settings (``settings``), and the open time computed from all of them with the
scheduling rules (``open_time``, ``preview``). Calls ``common``; reads the provisioning
document's shapes of each thing (``accounts.provisioning``)."""
