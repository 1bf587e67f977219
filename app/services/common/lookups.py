"""Finding and validating one row of a sub account (``find_owned``), or of whoever asks
(``get_checked``), by what a person typed or a URL named, and loading one named thing for a
sub account from its document (``load_named``: ``flask connections add``, ``flask webhooks
add``, the dashboard) with its name not yet taken.

Another sub account's row does not exist for this one (the caller's ``NotFound``), and an id
beyond the id columns' range names nothing (``app.services.common.ids``): it is answered without
asking the database, which would fail on it instead of finding nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar

from marshmallow import Schema, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import QueryableAttribute

from app.extensions import db
from app.models import SubAccount
from app.services.common.errors import InvalidRequest, NotFound
from app.services.common.ids import is_storable_id
from app.validation import describe_errors, flatten_errors

Row = TypeVar("Row")


class _SubAccountRow(Protocol):
    """A model with the columns ``id`` and ``sub_account_id`` (as read on the class)."""

    id: ClassVar[QueryableAttribute[int]]
    sub_account_id: ClassVar[QueryableAttribute[Any]]  # int, or int | None (an ApiKey's)


OwnedRow = TypeVar("OwnedRow", bound=_SubAccountRow)


def find_owned(
    model: type[OwnedRow], sub_account: SubAccount, row_id: int, not_found: type[NotFound]
) -> OwnedRow:
    """The sub account's ``model`` row ``row_id``, else ``not_found``."""
    if not is_storable_id(row_id):
        raise not_found()
    row = db.session.scalar(
        select(model).where(model.id == row_id, model.sub_account_id == sub_account.id)
    )
    if row is None:
        raise not_found()
    return row


def rows_in_order(model: type[OwnedRow], sub_account_id: int | None = None) -> list[OwnedRow]:
    """``model``'s rows in id order: all of them (operators), or one sub account's."""
    stmt = select(model).order_by(model.id)
    if sub_account_id is not None:
        stmt = stmt.where(model.sub_account_id == sub_account_id)
    return list(db.session.scalars(stmt))


def get_checked(
    model: type[Row], row_id: int, belongs: Callable[[Row], bool], not_found: type[NotFound]
) -> Row:
    """The ``model`` row ``row_id`` when ``belongs(row)`` (it is the asker's), else
    ``not_found``: to whom a row does not belong, it does not exist."""
    row = db.session.get(model, row_id) if is_storable_id(row_id) else None
    if row is None or not belongs(row):
        raise not_found()
    return row


def load_document(schema: Schema, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` loaded by ``schema``; every problem named by field (``InvalidRequest``)."""
    try:
        return schema.load(document)
    except ValidationError as err:
        errors = flatten_errors(err.messages)
        raise InvalidRequest(describe_errors(errors), errors=errors) from None


def refuse_taken_name(model: Any, sub_account: SubAccount, name: str, *, except_id: int) -> None:
    """A renamed row keeps its name unique among the sub account's ``model`` rows, as
    ``load_named`` keeps a new one's."""
    taken = db.session.scalar(
        select(model.id).where(
            model.sub_account_id == sub_account.id, model.name == name, model.id != except_id
        )
    )
    if taken is not None:
        errors = {"name": [f"Duplicate name '{name}'."]}
        raise InvalidRequest(describe_errors(errors), errors=errors)


def load_named(
    sub_account_id: int, schema: Schema, document: dict[str, Any], model: Any
) -> tuple[SubAccount, dict[str, Any]]:
    """The sub account, and ``document`` loaded by ``schema`` with its ``name`` not yet taken
    among the sub account's ``model`` rows; every problem named by field."""
    sub_account = db.session.get(SubAccount, sub_account_id)
    if sub_account is None:
        raise NotFound("Sub account not found")
    doc = load_document(schema, document)
    taken = db.session.scalar(
        select(model.id).where(model.sub_account_id == sub_account_id, model.name == doc["name"])
    )
    if taken is not None:
        errors = {"name": [f"Duplicate name '{doc['name']}'."]}
        raise InvalidRequest(describe_errors(errors), errors=errors)
    return sub_account, doc
