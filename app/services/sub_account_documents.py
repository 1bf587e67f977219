"""Adding one named thing to a sub account from the provisioning document's fields, outside a
whole provisioning run (``flask connections add``, ``flask webhooks add``, the dashboard)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError
from sqlalchemy import select

from app.extensions import db
from app.models import SubAccount
from app.services.errors import InvalidRequest, NotFound
from app.validation import describe_errors, flatten_errors


def load_named(
    sub_account_id: int, schema: Schema, document: dict[str, Any], model: Any
) -> tuple[SubAccount, dict[str, Any]]:
    """The sub account, and ``document`` loaded by ``schema`` with its ``name`` not yet taken
    among the sub account's ``model`` rows; every problem named by field."""
    sub_account = db.session.get(SubAccount, sub_account_id)
    if sub_account is None:
        raise NotFound("Sub account not found")
    try:
        doc = schema.load(document)
    except ValidationError as err:
        errors = flatten_errors(err.messages)
        raise InvalidRequest(describe_errors(errors), errors=errors) from None
    taken = db.session.scalar(
        select(model.id).where(model.sub_account_id == sub_account_id, model.name == doc["name"])
    )
    if taken is not None:
        errors = {"name": [f"Duplicate name '{doc['name']}'."]}
        raise InvalidRequest(describe_errors(errors), errors=errors)
    return sub_account, doc
