"""Absolute links come from ``PUBLIC_URL``, never from the request's ``Host``: required in
production, derived from the listening address in the embedded default."""

from __future__ import annotations

import re

import pytest

from app.config import SettingsError, load_settings
from tests.dashboard_users import csrf_token, owner_email, sign_in

LINK = re.compile(r'value="([^"]*/invite/[^"]+)"')


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("APP_ENV", "PUBLIC_URL", "HOST", "PORT", "SECRET_KEY", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    # Named, so that loading the settings starts no embedded PostgreSQL; nothing connects.
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:9/unused")
    return monkeypatch


def public_url(tmp_path) -> str:
    return load_settings(tmp_path).base_url


def invitation_link(client, tenant, host: str) -> str:
    """The invitation link an owner gets while every request names ``host`` as its Host."""
    client.environ_base["HTTP_HOST"] = host
    sign_in(client, owner_email(tenant))
    token = csrf_token(client, "/dashboard/team")
    response = client.post(
        "/dashboard/team/invitations",
        data={"email": "new.person@example.test", "csrf_token": token},
    )
    found = LINK.search(response.get_data(as_text=True))
    assert found, response.get_data(as_text=True)
    return found.group(1)


def test_an_invitation_link_ignores_the_requests_host(make_app, tenants):
    app = make_app(PUBLIC_URL="https://calendar.example.test")
    with app.app_context():
        link = invitation_link(app.test_client(), tenants.create(), "evil.test")
    assert link.startswith("https://calendar.example.test/invite/")
    assert "evil.test" not in link


def test_an_invitation_link_keeps_the_public_urls_path(make_app, tenants):
    app = make_app(PUBLIC_URL="https://example.test/calendar/")
    with app.app_context():
        link = invitation_link(app.test_client(), tenants.create(), "evil.test")
    assert link.startswith("https://example.test/calendar/invite/")


def test_the_embedded_default_links_to_the_listening_port(clean_env, tmp_path):
    clean_env.setenv("PORT", "5095")
    assert public_url(tmp_path) == "http://127.0.0.1:5095"


def test_the_embedded_default_links_to_port_5000_without_a_port(clean_env, tmp_path):
    assert public_url(tmp_path) == "http://127.0.0.1:5000"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("0.0.0.0", "http://127.0.0.1:8000"),
        ("::1", "http://[::1]:8000"),
        ("::", "http://127.0.0.1:8000"),
    ],
)
def test_the_embedded_default_links_to_the_listening_host(clean_env, tmp_path, host, expected):
    clean_env.setenv("HOST", host)
    clean_env.setenv("PORT", "8000")
    assert public_url(tmp_path) == expected


def test_production_requires_a_public_url(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    clean_env.setenv("SECRET_KEY", "from-env")
    clean_env.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    with pytest.raises(SettingsError, match="PUBLIC_URL must be set"):
        public_url(tmp_path)


def test_production_takes_the_public_url_without_its_trailing_slash(clean_env, tmp_path):
    clean_env.setenv("APP_ENV", "production")
    clean_env.setenv("SECRET_KEY", "from-env")
    clean_env.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    clean_env.setenv("PUBLIC_URL", "https://calendar.example.test/")
    assert public_url(tmp_path) == "https://calendar.example.test"


@pytest.mark.parametrize(
    "given",
    ["calendar.example.test", "ftp://calendar.example.test", "https://", "https://x.test/?a=1"],
)
def test_a_public_url_that_is_not_a_base_url_is_refused(clean_env, tmp_path, given):
    clean_env.setenv("PUBLIC_URL", given)
    with pytest.raises(SettingsError, match="PUBLIC_URL"):
        public_url(tmp_path)
