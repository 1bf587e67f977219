"""Encryption of stored third-party secrets (CalDAV passwords, webhook signing secrets).

Fernet (AES-128-CBC + HMAC-SHA256) with a key derived from ``SECRET_KEY`` by HKDF, so an
operator has one secret to manage. Rotation keeps stored secrets readable: the new key goes in
``SECRET_KEY``, the old ones stay in ``SECRET_KEY_FALLBACKS`` (Flask reads the same list for
session cookies) until ``flask secrets reencrypt`` has rewritten every stored secret with the
new key (``app.services.common.reencryption``).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


class SecretUnreadable(Exception):
    pass


def _fernet(secret_key: str) -> Fernet:
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"calendar-connection-secret"
    ).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def _any_of(keys: Sequence[str]) -> MultiFernet:
    return MultiFernet([_fernet(key) for key in keys])


def encrypt_secret(plain: str, secret_key: str) -> str:
    return _fernet(secret_key).encrypt(plain.encode()).decode()


def decrypt_secret(token: str, keys: Sequence[str]) -> str:
    """``token``'s plain text, with whichever of ``keys`` encrypted it."""
    try:
        return _any_of(keys).decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("stored secret cannot be decrypted with this SECRET_KEY") from None


def reencrypted(token: str, keys: Sequence[str]) -> str:
    """``token`` encrypted again with the first of ``keys``, whichever of them encrypted it."""
    try:
        return _any_of(keys).rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("stored secret cannot be decrypted with this SECRET_KEY") from None
