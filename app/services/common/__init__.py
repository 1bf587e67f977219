"""What every service area uses, and which uses none of them: the errors a use case reports
(``errors``), ids and instants as clients send them (``ids``, ``instants``), rows of a sub
account found by what a person typed (``lookups``), the calendar's write lock (``locking``),
bearer tokens (``tokens``), which jobs own their transactions (``transactions``) and the
encryption of stored secrets (``encryption``, ``reencryption``). Imports models and scheduling
only."""
