"""Configuration from the environment, with an embedded default."""

from __future__ import annotations

import pytest

from app.config import Config, database_url_from_env, load_config
from app.services.integrations.calendars.oauth import oauth_provider

ENV_VARS = (
    "APP_ENV",
    "DATABASE_URL",
    "SECRET_KEY",
    "SECRET_KEY_FALLBACKS",
    "REDIS_URL",
    "PUBLIC_URL",
    "GOOGLE_CLIENT_ID",
    "GOOGLE_CLIENT_SECRET",
    "MICROSOFT_CLIENT_ID",
    "MICROSOFT_CLIENT_SECRET",
    "MICROSOFT_TENANT",
    "SYNC_INTERVAL_SECONDS",
    "PUSH_RESYNC_SECONDS",
    "CALENDAR_PUSH",
    "CALENDAR_LIVE_CHECK",
    "CALENDAR_LIVE_CHECK_TIMEOUT_S",
    "PUSH_RATE_LIMIT",
)


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def defaults():
    return {k: getattr(Config, k) for k in dir(Config) if k.isupper()}


def test_no_environment_means_sqlite_under_instance(clean_env, tmp_path):
    config = defaults()
    load_config(config, str(tmp_path / "instance"))
    assert (
        config["SQLALCHEMY_DATABASE_URI"]
        == f"sqlite:///{tmp_path / 'instance' / 'calendar.sqlite3'}"
    )


def test_secret_key_is_generated_once_into_instance(clean_env, tmp_path):
    first, second = defaults(), defaults()
    load_config(first, str(tmp_path))
    load_config(second, str(tmp_path))
    assert len(first["SECRET_KEY"]) >= 32
    assert first["SECRET_KEY"] == second["SECRET_KEY"]
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_production_requires_secret_key(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    with pytest.raises(RuntimeError, match="SECRET_KEY"):
        load_config(defaults(), str(tmp_path))
    assert not (tmp_path / "secret_key").exists()


def test_environment_secret_key_wins(clean_env, tmp_path):
    clean_env.setenv("SECRET_KEY", "from-env")
    config = defaults()
    load_config(config, str(tmp_path))
    assert config["SECRET_KEY"] == "from-env"


def test_earlier_secret_keys_come_comma_separated_from_the_environment(clean_env, tmp_path):
    clean_env.setenv("SECRET_KEY", "new-key")
    clean_env.setenv("SECRET_KEY_FALLBACKS", "older-key, oldest-key,")
    config = defaults()
    load_config(config, str(tmp_path))
    assert config["SECRET_KEY_FALLBACKS"] == ["older-key", "oldest-key"]


@pytest.mark.parametrize(
    "given, expected",
    [
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
    ],
)
def test_database_url_uses_psycopg3(given, expected):
    assert database_url_from_env(given) == expected


def test_database_url_from_environment(clean_env, tmp_path):
    clean_env.setenv("DATABASE_URL", "postgres://app@db.internal/calendar")
    config = defaults()
    load_config(config, str(tmp_path))
    assert config["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://app@db.internal/calendar"


def test_production_requires_redis(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    clean_env.setenv("SECRET_KEY", "from-env")
    with pytest.raises(RuntimeError, match="REDIS_URL"):
        load_config(defaults(), str(tmp_path))


def test_production_starts_with_redis(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    clean_env.setenv("SECRET_KEY", "from-env")
    clean_env.setenv("REDIS_URL", "redis://cache.internal:6379/0")
    clean_env.setenv("PUBLIC_URL", "https://calendar.example.test")
    config = defaults()
    load_config(config, str(tmp_path))
    assert config["REDIS_URL"] == "redis://cache.internal:6379/0"


def test_calendar_providers_come_from_the_environment_and_default_to_the_real_endpoints(
    clean_env, tmp_path
):
    clean_env.setenv("GOOGLE_CLIENT_ID", "id.apps.example")
    clean_env.setenv("GOOGLE_CLIENT_SECRET", "shh")
    clean_env.setenv("MICROSOFT_TENANT", "contoso.example")
    config = defaults()
    load_config(config, str(tmp_path))
    google = oauth_provider("google", config)
    assert (google.client_id, google.configured) == ("id.apps.example", True)
    assert google.token_url == "https://oauth2.googleapis.com/token"
    assert google.api_url == "https://www.googleapis.com/calendar/v3"
    microsoft = oauth_provider("microsoft", config)
    assert microsoft.authorize_url == (
        "https://login.microsoftonline.com/contoso.example/oauth2/v2.0/authorize"
    )
    assert microsoft.missing_settings == ["MICROSOFT_CLIENT_ID", "MICROSOFT_CLIENT_SECRET"]


def test_the_fresh_calendar_settings_default_to_a_minutes_poll_and_a_best_effort_check(
    clean_env, tmp_path
):
    config = defaults()
    load_config(config, str(tmp_path))
    assert (config["SYNC_INTERVAL_SECONDS"], config["PUSH_RESYNC_SECONDS"]) == (60, 1800)
    assert (config["CALENDAR_PUSH"], config["CALENDAR_LIVE_CHECK"]) == ("auto", "best_effort")
    assert config["CALENDAR_LIVE_CHECK_TIMEOUT_S"] == 1.5


@pytest.mark.parametrize(
    ("name", "value"), [("CALENDAR_LIVE_CHECK", "sometimes"), ("CALENDAR_PUSH", "maybe")]
)
def test_a_mistyped_fresh_calendar_setting_fails_at_start_up(clean_env, tmp_path, name, value):
    from app import create_app

    clean_env.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'x.sqlite3'}"})


def test_the_push_endpoints_limit_is_read_from_the_environment(clean_env, tmp_path):
    clean_env.setenv("PUSH_RATE_LIMIT", "100/second")
    config = defaults()
    load_config(config, str(tmp_path))
    assert config["PUSH_RATE_LIMIT"] == "100/second"
