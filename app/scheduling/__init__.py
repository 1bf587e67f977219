"""Pure scheduling domain: instants, timezones, intervals, slots and the conflict rule.

Nothing here imports Flask or SQLAlchemy; functions take and return plain values so they can be
tested (and benchmarked) without an app.
"""
