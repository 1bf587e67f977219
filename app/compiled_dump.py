"""Schemas that dump through a plan compiled from their own fields.

marshmallow dumps field by field through several layers (accessor, ``serialize``, default
handling, ``_serialize``): about 4 µs a field, which made up a quarter to a third of the hot
answers (a page of 50 bookings with attendees, 31 days of slots). A ``CompiledSchema`` reads
its declared fields once and turns each into one small converter; dumping is then a dict
comprehension per object. The schema stays the single definition of the shape (and what the
OpenAPI document shows); ``tests/api/test_compiled_dump.py`` holds the compiled output equal to
marshmallow's own for every representation.

Field classes without a converter here (a custom ``_serialize``), fields with a dotted
``attribute``, and schemas with ``pre_dump``/``post_dump`` hooks fall back to marshmallow's own
path, field by field or whole, so the result is the same, only slower.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from marshmallow import Schema, fields
from marshmallow.utils import missing

Converter = Callable[[Any], Any]
Plan = Callable[[Any], dict[str, Any]]

_UNSET = object()
# Field classes of this project, registered by the module defining them. Classes are matched
# exactly: a subclass may serialize differently.
_REGISTERED: dict[type, Converter] = {}


def register_converter(field_class: type, convert: Converter) -> None:
    """``convert`` dumps a present, non-None value of ``field_class`` exactly as its
    ``_serialize`` does."""
    _REGISTERED[field_class] = convert


class CompiledSchema(Schema):
    """A marshmallow schema whose ``dump`` runs a plan compiled from its fields on first use."""

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        plan = self.__dict__.get("_compiled_plan", _UNSET)
        if plan is _UNSET:
            plan = self.__dict__["_compiled_plan"] = _compile(self)
        if plan is None:
            return super().dump(obj, many=many)
        if self.many if many is None else many:
            return [plan(item) for item in obj]
        return plan(obj)


def _compile(schema: Schema) -> Plan | None:
    if schema._hooks.get("pre_dump") or schema._hooks.get("post_dump"):
        return None
    steps = [
        (name, field.data_key or name, field.attribute or name, _converter(field))
        for name, field in schema.dump_fields.items()
    ]
    if any("." in attribute for _, _, attribute, _ in steps):
        return None

    def plan(obj: Any) -> dict[str, Any]:
        read = (
            obj.get if isinstance(obj, Mapping) else lambda key, default: getattr(obj, key, default)
        )
        document: dict[str, Any] = {}
        for name, key, attribute, convert in steps:
            value = read(attribute, _UNSET)
            if value is _UNSET or convert is None:
                # Absent (defaults apply) or no converter: marshmallow's own path.
                value = schema.dump_fields[name].serialize(name, obj, schema.get_attribute)
                if value is not missing:
                    document[key] = value
            else:
                document[key] = None if value is None else convert(value)
        return document

    return plan


def _converter(field: fields.Field) -> Converter | None:
    """What dumps a present, non-None value of ``field`` (None stays None for every field
    here, as in marshmallow); ``None`` when only marshmallow knows."""
    kind = type(field)
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    if kind is fields.Integer and not field.as_string:
        return int
    if _serializer_of(kind) is fields.String:  # String and subclasses that keep its dumping
        return str
    if kind in (fields.Boolean, fields.Date):  # their own conversion, minus the layers around it
        return lambda value: field._serialize(value, None, None)
    if kind is fields.Nested:
        return _nested(field)
    if kind is fields.List:
        inner = _converter(field.inner)
        if inner is None:
            return None
        return lambda values: [None if item is None else inner(item) for item in values]
    if kind is fields.Dict and field.value_field is None:
        if field.key_field is None:
            return dict
        if type(field.key_field) is fields.String:
            return lambda mapping: {str(key): value for key, value in mapping.items()}
    return None


def _serializer_of(kind: type) -> type:
    """The class whose ``_serialize`` the field class uses."""
    return next(c for c in kind.__mro__ if "_serialize" in c.__dict__)


def _nested(field: fields.Nested) -> Converter | None:
    schema = field.schema
    if not isinstance(schema, CompiledSchema) or field.only or field.exclude:
        return None
    if schema.many or field.many:
        return lambda values: schema.dump(values, many=True)
    return schema.dump
