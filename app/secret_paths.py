"""Paths that carry a secret: the segment after ``/invite/``, ``/reset-password/`` or
``/manage/`` is an invitation's, a password reset's or an attendee's manage-link token, which
opens what it names to whoever has it. Logs mask it (``app.logs`` for the app's lines, the
access log in ``gunicorn.conf.py``).

A module of its own, importing nothing: ``gunicorn.conf.py`` reads it in the master, before
gevent patches the workers, where importing the app would be too early.
"""

from __future__ import annotations

import re

SECRET_PATH_PREFIXES = ("/invite/", "/reset-password/", "/manage/")
# A secret path's token: the prefix kept, the segment after it replaced (``mask_secret_paths``).
SECRET_IN_PATH = re.compile(
    "(" + "|".join(re.escape(prefix) for prefix in SECRET_PATH_PREFIXES) + r")[^/\s?\"']+"
)


def mask_secret_paths(text: str) -> str:
    """``text`` with every secret path segment replaced by ``…``."""
    return SECRET_IN_PATH.sub(r"\1…", text)
