"""A sub account's contacts: everyone who was an attendee of its bookings (``bookings`` creates
and refreshes them), found, corrected and deleted from the dashboard.

A contact is a record beside the bookings, not their owner: its bookings are the ones with an
attendee of its email, and deleting it leaves them as they are (a later booking by the same
email makes a new contact).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates
from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.models import Attendee, Booking, Contact, SubAccount
from app.models.limits import EMAIL_MAX, NAME_MAX, PHONE_MAX
from app.services.common.errors import InvalidRequest, NotFound
from app.services.common.lookups import find_owned
from app.validation import Text, describe_errors, flatten_errors


class ContactNotFound(NotFound):
    message = "Contact not found"


class ContactDoc(Schema):
    """A contact's fields as the booking API takes an attendee's (same lengths: the columns')."""

    email = fields.Email(validate=validate.Length(max=EMAIL_MAX))
    name = Text(allow_none=True, validate=validate.Length(max=NAME_MAX))
    firstName = Text(allow_none=True, validate=validate.Length(max=NAME_MAX))
    lastName = Text(allow_none=True, validate=validate.Length(max=NAME_MAX))
    phone = Text(allow_none=True, validate=validate.Length(max=PHONE_MAX))

    @validates("email")
    def fits_once_lower_cased(self, value: str, **kwargs: Any) -> None:
        # Emails are stored lower-cased, and lower-casing can lengthen a string ("İ" → "i̇").
        if len(value.strip().lower()) > EMAIL_MAX:
            raise ValidationError(f"Longer than {EMAIL_MAX} characters once lower-cased.")


_COLUMNS = {"name": "name", "firstName": "first_name", "lastName": "last_name", "phone": "phone"}


def _invalid(errors: dict[str, list[str]]) -> InvalidRequest:
    return InvalidRequest(describe_errors(errors), errors=errors)


def list_contacts(
    sub_account: SubAccount, search: str | None, *, limit: int, offset: int
) -> tuple[Sequence[Contact], int]:
    """One page of the sub account's contacts whose name or email contains ``search`` (any
    case), by name, and the count of all matches."""
    stmt = select(Contact).where(Contact.sub_account_id == sub_account.id)
    term = (search or "").strip().lower()
    if term:
        stmt = stmt.where(
            or_(
                *(
                    func.lower(column).contains(term, autoescape=True)
                    for column in (
                        Contact.email,
                        Contact.name,
                        Contact.first_name,
                        Contact.last_name,
                    )
                )
            )
        )
    total = db.session.scalar(select(func.count()).select_from(stmt.subquery()))
    page = db.session.scalars(
        stmt.order_by(func.lower(func.coalesce(Contact.name, Contact.email)), Contact.id)
        .limit(limit)
        .offset(offset)
    ).all()
    return page, total or 0


def get_contact(sub_account: SubAccount, contact_id: int) -> Contact:
    """The sub account's contact ``contact_id``; another sub account's is not found."""
    return find_owned(Contact, sub_account, contact_id, ContactNotFound)


def contact_bookings(
    sub_account: SubAccount, contact: Contact, *, limit: int = 100
) -> tuple[Sequence[Booking], int]:
    """The newest ``limit`` of the sub account's bookings with an attendee of the contact's
    email, and how many there are."""
    stmt = select(Booking).where(
        Booking.sub_account_id == sub_account.id,
        Booking.id.in_(select(Attendee.booking_id).where(Attendee.email == contact.email)),
    )
    total = db.session.scalar(select(func.count()).select_from(stmt.subquery()))
    found = db.session.scalars(
        stmt.order_by(Booking.start_at.desc(), Booking.id.desc()).limit(limit)
    ).all()
    return found, total or 0


def update_contact(sub_account: SubAccount, contact_id: int, document: dict[str, Any]) -> Contact:
    """Apply ``document`` (any of ``email``, ``name``, ``firstName``, ``lastName``, ``phone``;
    blank text clears a field) to the contact. The email stays unique in the sub account.
    Flushes, never commits."""
    contact = get_contact(sub_account, contact_id)
    try:
        doc = ContactDoc().load(document)
    except ValidationError as err:
        raise _invalid(flatten_errors(err.messages)) from None
    if "email" in doc:
        email = doc["email"].strip().lower()
        if email != contact.email and _email_taken(sub_account, email):
            raise _invalid({"email": [f"Another contact has the email '{email}'."]})
        contact.email = email
    for field, column in _COLUMNS.items():
        if field in doc:
            setattr(contact, column, (doc[field] or "").strip() or None)
    try:
        db.session.flush()
    except IntegrityError:  # taken meanwhile by a booking's new contact
        raise _invalid({"email": ["Another contact has this email."]}) from None
    return contact


def delete_contact(sub_account: SubAccount, contact_id: int) -> None:
    """Delete the contact record; its bookings and their attendees stay as they are."""
    db.session.delete(get_contact(sub_account, contact_id))
    db.session.flush()


def _email_taken(sub_account: SubAccount, email: str) -> bool:
    return (
        db.session.scalar(
            select(Contact.id).where(
                Contact.sub_account_id == sub_account.id, Contact.email == email
            )
        )
        is not None
    )
