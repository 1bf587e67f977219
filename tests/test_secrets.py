"""Stored calendar passwords are encrypted with a key derived from SECRET_KEY."""

import pytest

from app.services.secrets import SecretUnreadable, decrypt_secret, encrypt_secret


def test_round_trip():
    token = encrypt_secret("caldav-password", "key-one")
    assert "caldav-password" not in token
    assert decrypt_secret(token, "key-one") == "caldav-password"


def test_another_secret_key_cannot_read_it():
    token = encrypt_secret("caldav-password", "key-one")
    with pytest.raises(SecretUnreadable):
        decrypt_secret(token, "key-two")
