"""Helpers for dashboard tests through Flask's test client: forms are fetched first and their
CSRF token sent back, as a browser does."""

from __future__ import annotations

import re

from app.extensions import db
from app.models import Role, SubAccount, User
from app.services.accounts.passwords import hash_password

PASSWORD = "s3cret-pass"  # tests.factories' agency owners

_HIDDEN = re.compile(r'name="(csrf_token|ticket)" type="hidden" value="([^"]*)"')
_PLAIN_KEY = re.compile(r'value="(cbk_[A-Za-z0-9_-]{43})"')
_TOKEN = re.compile(
    r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"'
)


def csrf_token(client, path: str) -> str:
    page = client.get(path).get_data(as_text=True)
    found = _TOKEN.search(page)
    assert found, f"no CSRF token on {path}"
    return found.group(1) or found.group(2)


def hidden_fields(client, path: str) -> dict[str, str]:
    """The form's CSRF token and single-use ticket, as a browser would send them back."""
    return dict(_HIDDEN.findall(client.get(path).get_data(as_text=True)))


def sign_in(client, email: str, password: str = PASSWORD):
    token = csrf_token(client, "/login")
    return client.post("/login", data={"email": email, "password": password, "csrf_token": token})


def sign_in_browser(page, base: str, email: str, password: str) -> None:
    """Sign in through the login form in a real browser (Playwright), up to the overview."""
    page.goto(base + "/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/dashboard/s/*/")


def owner_email(tenant) -> str:
    return db.session.get(User, tenant.raw["agencies"][0]["ownerId"]).email


def agency_user(tenant, *granted: int, email: str = "helper@agency.test") -> User:
    """An agency user of ``tenant``'s agency with the sub accounts ``granted``."""
    user = User(
        agency_id=tenant.agency_id,
        email=email,
        password_hash=hash_password(PASSWORD),
        role=Role.AGENCY_USER,
    )
    user.granted_sub_accounts = [db.session.get(SubAccount, i) for i in granted]
    db.session.add(user)
    db.session.commit()
    return user


# The API keys page
def keys_page(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/api-keys"


def create_key(client, tenant, name="agent", permissions=(), expires_at="", fields=None):
    """Make a key on the API keys page (signed in as the owner); returns the response, whose
    page shows the plain key once (``plain_key_of``)."""
    data = {**(fields or hidden_fields(client, keys_page(tenant)))}
    data.update(name=name, permissions=list(permissions), expires_at=expires_at)
    return client.post(keys_page(tenant), data=data)


def plain_key_of(response) -> str:
    found = _PLAIN_KEY.search(response.get_data(as_text=True))
    assert found, "no plain key on the page"
    return found.group(1)
