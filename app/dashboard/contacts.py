"""Contacts: the people who booked, searched by name or email, each with their bookings, and
corrected or deleted (the record only; bookings stay) through ``app.services.bookings.contacts``."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import EmailField, SearchField, StringField
from wtforms.validators import Length, Optional

from app.dashboard.changes import Page, press_button, save_form
from app.dashboard.forms import ActionForm, page_count, page_field
from app.dashboard.views import dashboard
from app.models import Contact, SubAccount
from app.models.limits import EMAIL_MAX
from app.services.accounts.users import open_sub_account
from app.services.bookings.contacts import (
    contact_bookings,
    delete_contact,
    get_contact,
    list_contacts,
    update_contact,
)

PAGE_SIZE = 25
FIELDS = {"firstName": "first_name", "lastName": "last_name"}


class ContactSearchForm(FlaskForm):
    """A GET form: no CSRF token (it changes nothing)."""

    class Meta:
        csrf = False

    q = SearchField("Search by name or email", validators=[Optional(), Length(max=EMAIL_MAX)])
    page = page_field()


class ContactForm(FlaskForm):
    email = EmailField("Email")
    name = StringField("Name")
    first_name = StringField("First name (optional)")
    last_name = StringField("Last name (optional)")
    phone = StringField("Phone (optional)")

    def document(self) -> dict:
        return {
            "email": (self.email.data or "").strip(),
            "name": self.name.data,
            "firstName": self.first_name.data,
            "lastName": self.last_name.data,
            "phone": self.phone.data,
        }


@dashboard.route("/s/<int:sub_account_id>/contacts")
def contacts(sub_account_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = ContactSearchForm(request.args)
    search, page = None, 1  # a search with errors: shown, not applied
    if form.validate():
        search, page = form.q.data or None, form.page.data or 1
    found, total = list_contacts(
        sub_account, search, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE
    )
    return render_template(
        "dashboard/contacts.html",
        sub_account=sub_account,
        form=form,
        contacts=found,
        total=total,
        search=search,
        page=page,
        pages=page_count(total, PAGE_SIZE),
    )


@dashboard.route("/s/<int:sub_account_id>/contacts/<int:contact_id>", methods=["GET", "POST"])
def contact(sub_account_id: int, contact_id: int) -> Page:
    """The contact, their bookings, and the form that corrects them (POST saves it)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    found = get_contact(sub_account, contact_id)
    form = ContactForm(obj=found)
    if request.method == "GET":
        return _page(sub_account, found, form)
    _, answer = save_form(
        form,
        lambda: update_contact(sub_account, found.id, form.document()),
        lambda: _page(sub_account, found, form),  # refused: rolled back, as stored
        FIELDS,
        invalid_status=400,
    )
    if answer is not None:
        return answer
    flash("Contact saved.")
    return redirect(
        url_for("dashboard.contact", sub_account_id=sub_account.id, contact_id=found.id)
    )


@dashboard.route("/s/<int:sub_account_id>/contacts/<int:contact_id>/delete", methods=["POST"])
def contact_delete(sub_account_id: int, contact_id: int) -> Response:
    sub_account = open_sub_account(current_user, sub_account_id)
    found = get_contact(sub_account, contact_id)
    deleted = press_button(
        ActionForm(),
        lambda: delete_contact(sub_account, found.id),
        f"Contact {found.email} deleted. Their bookings are kept.",
    )
    if not deleted:
        return redirect(
            url_for("dashboard.contact", sub_account_id=sub_account.id, contact_id=found.id)
        )
    return redirect(url_for("dashboard.contacts", sub_account_id=sub_account.id))


def _page(sub_account: SubAccount, found: Contact, form: ContactForm) -> str:
    bookings, total = contact_bookings(sub_account, found)
    return render_template(
        "dashboard/contact.html",
        sub_account=sub_account,
        contact=found,
        form=form,
        bookings=bookings,
        total=total,
        delete_form=ActionForm(),
    )
