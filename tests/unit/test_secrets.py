"""Stored secrets are encrypted with a key derived from SECRET_KEY; keys in SECRET_KEY_FALLBACKS
still read them, and re-encrypting moves them to the current key."""

import pytest

from app.services.common.encryption import (
    SecretUnreadable,
    decrypt_secret,
    encrypt_secret,
    reencrypted,
)


def test_round_trip():
    token = encrypt_secret("caldav-password", "key-one")
    assert "caldav-password" not in token
    assert decrypt_secret(token, ["key-one"]) == "caldav-password"


def test_another_secret_key_cannot_read_it():
    token = encrypt_secret("caldav-password", "key-one")
    with pytest.raises(SecretUnreadable):
        decrypt_secret(token, ["key-two"])


def test_a_key_in_the_fallbacks_still_reads_what_it_encrypted():
    token = encrypt_secret("caldav-password", "old-key")
    assert decrypt_secret(token, ["new-key", "old-key"]) == "caldav-password"


def test_a_reencrypted_secret_needs_only_the_current_key():
    token = reencrypted(encrypt_secret("caldav-password", "old-key"), ["new-key", "old-key"])
    assert decrypt_secret(token, ["new-key"]) == "caldav-password"
    with pytest.raises(SecretUnreadable):
        decrypt_secret(token, ["old-key"])


def test_a_secret_none_of_the_keys_encrypted_cannot_be_reencrypted():
    token = encrypt_secret("caldav-password", "lost-key")
    with pytest.raises(SecretUnreadable):
        reencrypted(token, ["new-key", "old-key"])
