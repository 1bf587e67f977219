"""Contacts: searched by name or email in any case, paged, each with their bookings; edited
(the email unique in the sub account) and deleted without touching their bookings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.extensions import db
from app.models import Booking, Contact
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import make_booking


def add_contact(tenant, email: str, name: str | None = None, **fields) -> Contact:
    contact = Contact(sub_account_id=tenant.sub_account_id, email=email, name=name, **fields)
    db.session.add(contact)
    db.session.commit()
    return contact


def list_page(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/contacts"


def contact_page(tenant, contact_id) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/contacts/{contact_id}"


def edit(client, tenant, contact_id, **data):
    page = contact_page(tenant, contact_id)
    return client.post(page, data={**data, "csrf_token": csrf_token(client, page)})


def stored(contact_id) -> Contact | None:
    db.session.expire_all()
    return db.session.get(Contact, contact_id)


def test_contacts_are_listed_by_name_with_links(signed_in, tenant):
    pat = add_contact(tenant, "pat@example.test", "Pat Quinn", phone="+1 555 0100")
    add_contact(tenant, "ann@example.test", "Ann Lee")
    text = signed_in.get(list_page(tenant)).get_data(as_text=True)
    assert "2 contacts." in text and text.index("Ann Lee") < text.index("Pat Quinn")
    assert f'href="{contact_page(tenant, pat.id)}"' in text and "+1 555 0100" in text
    assert '<th scope="col">Email</th>' in text and text.count("<h1>") == 1


def test_search_matches_name_or_email_in_any_case(signed_in, tenant):
    add_contact(tenant, "pat@example.test", "Pat Quinn")
    add_contact(tenant, "sam@clinic.example", "Sam Ortiz")
    by_name = signed_in.get(list_page(tenant), query_string={"q": "qUINN"}).get_data(as_text=True)
    assert "1 contact matching" in by_name and "Pat Quinn" in by_name and "Sam" not in by_name
    by_email = signed_in.get(list_page(tenant), query_string={"q": "CLINIC.EX"})
    text = by_email.get_data(as_text=True)
    assert "1 contact matching" in text and "Sam Ortiz" in text and "Pat" not in text


def test_search_treats_wildcards_as_text(signed_in, tenant):
    add_contact(tenant, "pat@example.test", "Pat Quinn")
    text = signed_in.get(list_page(tenant), query_string={"q": "%"}).get_data(as_text=True)
    assert "0 contacts matching" in text


def test_the_list_is_paged(signed_in, tenant):
    for n in range(30):
        add_contact(tenant, f"person{n:02d}@example.test", f"Person {n:02d}")
    first = signed_in.get(list_page(tenant)).get_data(as_text=True)
    assert "30 contacts." in first and "Page 1 of 2" in first
    assert "Person 24" in first and "Person 25" not in first
    second = signed_in.get(list_page(tenant), query_string={"page": 2}).get_data(as_text=True)
    assert "Person 25" in second and "Person 29" in second and "Person 24" not in second


def test_a_bad_search_or_page_is_explained_not_a_500(signed_in, tenant):
    add_contact(tenant, "pat@example.test", "Pat Quinn")
    response = signed_in.get(list_page(tenant), query_string={"q": "x" * 10_000, "page": "two"})
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert "Field cannot be longer than 254 characters." in text
    assert "Not a valid integer value." in text and "1 contact." in text


def test_a_contacts_page_lists_their_bookings(signed_in, tenant):
    contact = add_contact(tenant, "pat@example.test", "Pat Quinn")
    start = (datetime.now(UTC) + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    theirs = make_booking(tenant, start, emails=("pat@example.test",))
    make_booking(tenant, start + timedelta(hours=2), emails=("sam@example.test",))
    text = signed_in.get(contact_page(tenant, contact.id)).get_data(as_text=True)
    booking_url = f"/dashboard/s/{tenant.sub_account_id}/bookings/{theirs.id}"
    assert f'href="{booking_url}"' in text and text.count("/bookings/") == 1
    assert "America/New_York" in text


def test_a_contact_is_edited(signed_in, tenant):
    contact = add_contact(tenant, "pat@example.test", "Pat Quinn")
    response = edit(
        signed_in,
        tenant,
        contact.id,
        email="Patricia@Example.test",
        name="Patricia Quinn",
        first_name="Patricia",
        last_name="Quinn",
        phone="+1 555 0199",
    )
    assert response.status_code == 302
    saved = stored(contact.id)
    assert (saved.email, saved.name, saved.first_name) == (
        "patricia@example.test",
        "Patricia Quinn",
        "Patricia",
    )
    assert (saved.last_name, saved.phone) == ("Quinn", "+1 555 0199")
    assert "Contact saved." in signed_in.get(contact_page(tenant, contact.id)).get_data(
        as_text=True
    )


def test_blank_optional_fields_are_cleared(signed_in, tenant):
    contact = add_contact(tenant, "pat@example.test", "Pat Quinn", phone="+1 555 0100")
    edit(signed_in, tenant, contact.id, email="pat@example.test", name="Pat Quinn", phone=" ")
    assert stored(contact.id).phone is None


def test_an_email_of_another_contact_is_refused(signed_in, tenant):
    contact = add_contact(tenant, "pat@example.test", "Pat Quinn")
    add_contact(tenant, "sam@example.test", "Sam Ortiz")
    response = edit(signed_in, tenant, contact.id, email="SAM@example.test", name="Pat")
    assert response.status_code == 200
    assert "Another contact has the email &#39;sam@example.test&#39;." in response.get_data(
        as_text=True
    )
    assert stored(contact.id).email == "pat@example.test"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("email", "not-an-email", "Not a valid email address."),
        ("email", "", "Not a valid email address."),
        ("name", "n" * 10_000, "Longer than maximum length 255."),
        ("phone", "5" * 10_000, "Longer than maximum length 50."),
    ],
)
def test_bad_fields_are_explained_not_a_500(signed_in, tenant, field, value, message):
    contact = add_contact(tenant, "pat@example.test", "Pat Quinn")
    data = {"email": "pat@example.test", "name": "Pat Quinn", field: value}
    response = edit(signed_in, tenant, contact.id, **data)
    assert response.status_code == 200
    assert f'<p class="error" id="{field}-errors">{message}</p>' in response.get_data(as_text=True)
    assert stored(contact.id).name == "Pat Quinn"


def test_deleting_a_contact_keeps_their_bookings(signed_in, tenant):
    contact = add_contact(tenant, "pat@example.test", "Pat Quinn")
    booking = make_booking(tenant, datetime.now(UTC) + timedelta(days=1), emails=(contact.email,))
    page = contact_page(tenant, contact.id)
    assert "the bookings above are kept" in signed_in.get(page).get_data(as_text=True)
    response = signed_in.post(f"{page}/delete", data={"csrf_token": csrf_token(signed_in, page)})
    assert response.status_code == 302 and response.headers["Location"] == list_page(tenant)
    assert stored(contact.id) is None
    assert db.session.get(Booking, booking.id).attendees[0].email == "pat@example.test"
    assert "Their bookings are kept." in signed_in.get(list_page(tenant)).get_data(as_text=True)


def test_a_delete_without_its_csrf_token_changes_nothing(signed_in, tenant):
    contact = add_contact(tenant, "pat@example.test", "Pat Quinn")
    signed_in.post(f"{contact_page(tenant, contact.id)}/delete")
    assert stored(contact.id) is not None


def test_another_sub_accounts_contact_is_not_found(client, tenants):
    mine, theirs = tenants.create(), tenants.create()
    contact = add_contact(theirs, "pat@example.test", "Pat Quinn")
    sign_in(client, owner_email(mine))
    token = csrf_token(client, list_page(mine))
    page = contact_page(mine, contact.id)  # their contact's id, under my sub account
    assert client.get(page).status_code == 404
    assert (
        client.post(page, data={"email": "x@example.test", "csrf_token": token}).status_code == 404
    )
    assert client.post(f"{page}/delete", data={"csrf_token": token}).status_code == 404
    assert stored(contact.id).email == "pat@example.test"
    assert client.get(contact_page(mine, 99999999999999999999)).status_code == 404
