"""The contract's camelCase, kept at the API's edge.

Services name their inputs' fields in Python's snake_case (``start_time``, ``event_type_id``);
the contract names them in camelCase (``startTime``, ``eventTypeId``). A request schema is a
``CamelCaseSchema``: its fields are named as the service input it loads, and each is given the
contract's name as its ``data_key``, which the OpenAPI document, the parser and marshmallow's
own errors use. Its ``post_load`` hands the service its input under the service's names.

A service refusal that names a field of its input (``start_time: …``, from
``app.services.common.instants.resolve_instant``) is told in the contract's name around the
view's service call: ``ContractNames(schema).told_in_refusals()``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from marshmallow import Schema
from marshmallow.fields import Field

from app.services.common.errors import ServiceError


def camel_case(name: str) -> str:
    """``first_name`` → ``firstName``; a name without an underscore stays as it is."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


class CamelCaseSchema(Schema):
    """A request schema whose fields carry the service input's names; clients and the
    document see the contract's camelCase ones (a field's own ``data_key`` wins)."""

    def on_bind_field(self, field_name: str, field_obj: Field) -> None:
        if field_obj.data_key is None and camel_case(field_name) != field_name:
            field_obj.data_key = camel_case(field_name)


class ContractNames:
    """The fields of the input ``schema`` loads, under the names a service gives them (its
    input's attributes) and under the contract's (the fields' ``data_key``)."""

    def __init__(self, schema: Schema) -> None:
        self._names = {
            name: field.data_key
            for name, field in schema.fields.items()
            if field.data_key is not None and field.data_key != name
        }
        # Snake_case names with an underscore: whole words no prose contains by chance.
        longest_first = sorted(self._names, key=len, reverse=True)
        self._words = re.compile(r"\b(?:" + "|".join(map(re.escape, longest_first)) + r")\b")

    def told(self, text: str) -> str:
        """``text`` with the service's field names replaced by the contract's."""
        if not self._names:
            return text
        return self._words.sub(lambda found: self._names[found.group()], text)

    @contextmanager
    def told_in_refusals(self) -> Iterator[None]:
        """Around a service call: a ``ServiceError`` it raises leaves with the contract's field
        names in its ``message`` and as the keys of its ``errors``."""
        try:
            yield
        except ServiceError as error:
            error.message = self.told(error.message)
            error.args = (error.message,)
            if error.errors is not None:
                error.errors = {
                    self.told(field): problems for field, problems in error.errors.items()
                }
            raise
