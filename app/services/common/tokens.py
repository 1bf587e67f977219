"""Bearer tokens the service hands out once (API keys, invitation links, hold tokens, dashboard
sessions): only a SHA-256 digest of each is stored, so a copy of the database opens nothing.

A token has 256 bits of randomness, so a plain SHA-256 (no salt, no slow hash) is enough: there
is nothing to guess from a digest.
"""

from __future__ import annotations

import hashlib
import secrets


def new_token() -> str:
    """A fresh token: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """What is stored of ``token``. Any string has one (a header may carry lone surrogates)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
