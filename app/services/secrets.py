"""Encryption of stored third-party secrets (CalDAV passwords).

Fernet (AES-128-CBC + HMAC-SHA256) with a key derived from ``SECRET_KEY`` by HKDF, so an
operator has one secret to manage; rotating ``SECRET_KEY`` means re-entering the passwords.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


class SecretUnreadable(Exception):
    pass


def _fernet(secret_key: str) -> Fernet:
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"calendar-connection-secret"
    ).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt_secret(plain: str, secret_key: str) -> str:
    return _fernet(secret_key).encrypt(plain.encode()).decode()


def decrypt_secret(token: str, secret_key: str) -> str:
    try:
        return _fernet(secret_key).decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("stored secret cannot be decrypted with this SECRET_KEY") from None
