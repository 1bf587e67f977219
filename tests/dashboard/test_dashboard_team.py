"""The agency's team, run by its owner: new sub accounts, invitations with one-time links,
and what each agency user may open."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
import time_machine

from app.extensions import db
from app.models import SubAccount, User
from tests.dashboard_users import PASSWORD, agency_user, csrf_token, owner_email, sign_in
from tests.factories import make_sub_account

LINK = re.compile(r'value="https?://[^/"]+(/invite/[^"]+)"')


@pytest.fixture
def owner(client, tenant):
    sign_in(client, owner_email(tenant))
    return owner_email(tenant)


def invite(client, email: str, *sub_account_ids: int):
    token = csrf_token(client, "/dashboard/team")
    return client.post(
        "/dashboard/team/invitations",
        data={
            "email": email,
            "sub_accounts": [str(i) for i in sub_account_ids],
            "csrf_token": token,
        },
    )


def link_in(response) -> str:
    found = LINK.search(response.get_data(as_text=True))
    assert found, "no invitation link on the page"
    return found.group(1)


def sign_out(client) -> None:
    client.post("/logout", data={"csrf_token": csrf_token(client, "/dashboard/password")})


def test_an_owner_creates_a_sub_account(client, tenant, owner):
    token = csrf_token(client, "/dashboard/team")
    response = client.post(
        "/dashboard/team/sub-accounts",
        data={"name": "Dental Berlin", "timezone": "Europe/Berlin", "csrf_token": token},
    )
    created = db.session.query(SubAccount).filter_by(name="Dental Berlin").one()
    assert response.headers["Location"] == f"/dashboard/s/{created.id}/"
    assert created.agency_id == tenant.agency_id
    assert created.settings.timezone == "Europe/Berlin"
    assert created.settings.default_duration == 30


@pytest.mark.parametrize(
    ("name", "timezone", "message"),
    [
        ("", "UTC", "Length must be between 1 and 255."),
        ("x" * 300, "UTC", "Length must be between 1 and 255."),
        ("Fine", "Mars/Olympus", "Unknown timezone"),
        ("Fine", "", "Unknown timezone"),
    ],
)
def test_a_bad_sub_account_is_explained_next_to_its_field(client, owner, name, timezone, message):
    token = csrf_token(client, "/dashboard/team")
    response = client.post(
        "/dashboard/team/sub-accounts",
        data={"name": name, "timezone": timezone, "csrf_token": token},
    )
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert message in page and 'aria-invalid="true"' in page


def test_a_sub_account_name_is_unique_in_the_agency(client, tenant, owner):
    taken = db.session.get(SubAccount, tenant.sub_account_id).name
    token = csrf_token(client, "/dashboard/team")
    response = client.post(
        "/dashboard/team/sub-accounts",
        data={"name": taken, "timezone": "UTC", "csrf_token": token},
    )
    assert response.status_code == 200
    assert f"A sub account named &#39;{taken}&#39; exists." in response.get_data(as_text=True)


def test_a_sub_account_is_not_created_without_the_forms_token(client, owner):
    client.post("/dashboard/team/sub-accounts", data={"name": "Sneaky", "timezone": "UTC"})
    assert db.session.query(SubAccount).filter_by(name="Sneaky").count() == 0


def test_an_invited_user_sets_a_password_and_sees_only_the_granted_sub_account(
    client, tenant, owner
):
    response = invite(client, "Helper@Agency.test", tenant.sub_account_id)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    link = link_in(response)
    user = db.session.query(User).filter_by(email="helper@agency.test").one()
    assert not user.active
    sign_out(client)
    assert sign_in(client, "helper@agency.test", "").status_code == 200  # no password yet

    page = client.get(link)
    assert "helper@agency.test" in page.get_data(as_text=True)
    accepted = client.post(
        link, data={"password": "a-long-password", "csrf_token": csrf_token(client, link)}
    )
    assert accepted.headers["Location"] == "/dashboard/"
    assert client.get("/dashboard/").headers["Location"] == f"/dashboard/s/{tenant.sub_account_id}/"
    assert client.get("/dashboard/team").status_code == 403


def test_an_invitation_link_works_once(client, tenant, owner):
    link = link_in(invite(client, "once@agency.test", tenant.sub_account_id))
    sign_out(client)
    token = csrf_token(client, link)
    client.post(link, data={"password": "a-long-password", "csrf_token": token})
    sign_out(client)
    again = client.get(link)
    assert again.status_code == 404
    assert "not valid" in again.get_data(as_text=True)


def test_an_invitation_link_expires_after_seven_days(client, tenant, owner):
    link = link_in(invite(client, "late@agency.test", tenant.sub_account_id))
    sign_out(client)
    with time_machine.travel(datetime.now() + timedelta(days=7, minutes=1)):
        assert client.get(link).status_code == 404


def test_a_short_password_is_refused_on_the_invitation_page(client, tenant, owner):
    link = link_in(invite(client, "short@agency.test", tenant.sub_account_id))
    sign_out(client)
    response = client.post(link, data={"password": "short", "csrf_token": csrf_token(client, link)})
    assert response.status_code == 200
    assert "Use at least 10 characters." in response.get_data(as_text=True)
    assert not db.session.query(User).filter_by(email="short@agency.test").one().active


def test_a_renewed_link_replaces_the_old_one(client, tenant, owner):
    old = link_in(invite(client, "renew@agency.test", tenant.sub_account_id))
    user = db.session.query(User).filter_by(email="renew@agency.test").one()
    page = f"/dashboard/team/users/{user.id}"
    new = link_in(client.post(f"{page}/renew", data={"csrf_token": csrf_token(client, page)}))
    assert new != old
    sign_out(client)
    assert client.get(old).status_code == 404
    assert client.get(new).status_code == 200


@pytest.mark.parametrize("email", ["", "not-an-email", "a" * 250 + "@x.test"])
def test_a_bad_invitation_address_is_explained(client, owner, email):
    response = invite(client, email)
    assert response.status_code == 200
    assert 'aria-invalid="true"' in response.get_data(as_text=True)


def test_an_existing_users_address_cannot_be_invited(client, tenant, owner):
    response = invite(client, owner.upper())
    assert f"A user with email &#39;{owner}&#39; exists." in response.get_data(as_text=True)


def test_another_agencys_sub_account_cannot_be_granted(client, tenants, tenant, owner):
    theirs = tenants.create()
    response = invite(client, "x@agency.test", theirs.sub_account_id)
    assert response.status_code == 404
    assert "Sub account not found" in response.get_data(as_text=True)
    assert db.session.query(User).filter_by(email="x@agency.test").count() == 0


def test_an_owner_changes_what_an_agency_user_may_open(client, tenant, owner):
    second = make_sub_account(tenant, "Second")
    helper = agency_user(tenant, tenant.sub_account_id)
    page = f"/dashboard/team/users/{helper.id}"
    client.post(
        page, data={"sub_accounts": [str(second.id)], "csrf_token": csrf_token(client, page)}
    )
    db.session.expire_all()
    assert [s.id for s in db.session.get(User, helper.id).granted_sub_accounts] == [second.id]


def test_a_deactivated_agency_user_is_signed_out_and_cannot_sign_in(app, tenant, owner, client):
    helper = agency_user(tenant, tenant.sub_account_id)
    theirs = app.test_client()
    sign_in(theirs, helper.email)
    assert theirs.get(f"/dashboard/s/{tenant.sub_account_id}/").status_code == 200
    page = f"/dashboard/team/users/{helper.id}"
    client.post(f"{page}/deactivate", data={"csrf_token": csrf_token(client, page)})
    assert theirs.get(f"/dashboard/s/{tenant.sub_account_id}/").status_code == 302
    assert sign_in(app.test_client(), helper.email, PASSWORD).status_code == 200  # refused


def test_another_agencys_user_is_not_found(client, tenants, owner):
    theirs = tenants.create()
    stranger = agency_user(theirs, theirs.sub_account_id, email="stranger@other.test")
    page = f"/dashboard/team/users/{stranger.id}"
    assert client.get(page).status_code == 404
    token = csrf_token(client, "/dashboard/team")
    for action in ("activate", "deactivate", "renew"):
        assert client.post(f"{page}/{action}", data={"csrf_token": token}).status_code == 404
    assert client.post(page, data={"csrf_token": token}).status_code == 404
