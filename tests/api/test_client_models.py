"""The typed client's models (``app/client/models.py``) against the OpenAPI document the app
serves. The client keeps models of its own (it talks to the API over HTTP and imports nothing
of the server), so nothing but this test stops the two from drifting: every property of an
answer's component is a field of the client model that reads it, with a type that takes the
property's values (``None`` where the document says nullable), and every field of the model is
a property of the component (the update's reduced forms only the first way round). Fields the
model requires are in every answer it reads; the attendee the client sends is one the
document's request takes."""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import date, datetime
from typing import Any

import pytest

from app.client import models

# Component → the client model that reads it; True: the model is the whole component (both
# ways round), False: the component is a reduced form showing part of the model's fields.
ANSWERS: dict[str, tuple[type, bool]] = {
    "Slot": (models.Slot, True),
    "AvailabilityDay": (models.AvailabilityDay, True),
    "Attendee": (models.Attendee, True),
    "Booking": (models.Booking, True),
    "BookingHost": (models.BookingHost, True),
    "BookingList": (models.BookingPage, True),
    "Cancellation": (models.Cancellation, True),
    "Hold": (models.Hold, True),
    "ReleasedHold": (models.ReleasedHold, True),
    "EventType": (models.EventType, True),
    "EventTypeHost": (models.EventTypeHost, True),
    "AttendeeBrief": (models.Attendee, False),
    "BookingUpdateResult": (models.Booking, False),
}
# Request components and what the client sends as one of them.
REQUESTS: dict[str, type] = {"AttendeeInput": models.NewAttendee}
# Components the client reads otherwise, or only sends: the error envelope (app.client.errors)
# and the request bodies (built from keyword arguments in app.client.client).
NOT_MODELS = {"Error", "CreateBooking", "UpdateBooking", "CancelBooking", "CreateHold"}

SCALARS: dict[tuple[str, str | None], type] = {
    ("integer", None): int,
    ("number", None): float,
    ("boolean", None): bool,
    ("string", None): str,
    ("string", "email"): str,
    ("string", "uri"): str,
    ("string", "date-time"): datetime,
    ("string", "date"): date,
    ("object", None): dict,
}


@pytest.fixture
def components(client: Any) -> dict[str, Any]:
    answer = client.get("/v1/api/openapi.json")
    assert answer.status_code == 200
    return answer.json["components"]["schemas"]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def model_fields(model: type) -> dict[str, Any]:
    """The model's fields by their API (camelCase) names, with their resolved type hints."""
    hints = typing.get_type_hints(model)
    return {camel(field.name): hints[field.name] for field in dataclasses.fields(model)}


def required_fields(model: type) -> set[str]:
    return {
        camel(field.name)
        for field in dataclasses.fields(model)
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    }


def split_optional(hint: Any) -> tuple[Any, bool]:
    """``X | None`` → ``(X, True)``; anything else → ``(hint, False)``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        assert len(members) == 1, f"{hint}: one type, or one type or None"
        return members[0], len(members) < len(typing.get_args(hint))
    return hint, False


def mismatch(hint: Any, prop: dict[str, Any]) -> str | None:
    """Why a field typed ``hint`` cannot hold the values ``prop`` documents, or None."""
    base, optional = split_optional(hint)
    if prop.get("nullable") and not optional:
        return f"the document says nullable, the client's {hint} does not take None"
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        expected = ANSWERS.get(name, (None, False))[0]
        return None if base is expected else f"{name} is read by {expected}, not {base}"
    if prop.get("type") == "array":
        if typing.get_origin(base) is not list:
            return f"an array, but the client has {base}"
        return mismatch(typing.get_args(base)[0], prop["items"])
    expected = SCALARS.get((prop.get("type"), prop.get("format")))
    if expected is None:
        return f"no client type known for {prop.get('type')}/{prop.get('format')}"
    found = typing.get_origin(base) or base
    return None if found is expected else f"{prop.get('type')} wants {expected}, client has {base}"


def test_every_component_of_the_document_is_accounted_for(components):
    known = set(ANSWERS) | set(REQUESTS) | NOT_MODELS
    assert set(components) == known, "a component came or went: map it to a client model"


@pytest.mark.parametrize("component", sorted(ANSWERS))
def test_each_answer_component_matches_its_client_model(components, component):
    model, whole = ANSWERS[component]
    properties = components[component]["properties"]
    fields = model_fields(model)
    missing = sorted(set(properties) - set(fields))
    assert not missing, f"{component} shows {missing}, which {model.__name__} does not read"
    if whole:
        extra = sorted(set(fields) - set(properties))
        assert not extra, f"{model.__name__} reads {extra}, which {component} does not show"
    problems = {
        name: problem
        for name, prop in properties.items()
        if (problem := mismatch(fields[name], prop))
    }
    assert not problems, f"{component} vs {model.__name__}: {problems}"
    absent = sorted(required_fields(model) - set(properties))
    assert not absent, f"{model.__name__} requires {absent}, which {component} lacks"


@pytest.mark.parametrize("component", sorted(REQUESTS))
def test_what_the_client_sends_is_what_the_request_takes(components, component):
    model = REQUESTS[component]
    schema = components[component]
    fields = model_fields(model)
    unknown = sorted(set(fields) - set(schema["properties"]))
    assert not unknown, f"{model.__name__} sends {unknown}, which {component} does not take"
    assert set(schema.get("required", [])) <= required_fields(model)
    # The client leaves out what is None (``without_none``): it sends values, never null.
    problems = {
        name: problem
        for name, hint in fields.items()
        if (
            problem := mismatch(
                split_optional(hint)[0], {**schema["properties"][name], "nullable": False}
            )
        )
    }
    assert not problems, f"{model.__name__} vs {component}: {problems}"


def test_a_model_that_drifted_is_caught(components):
    """The check itself: a field renamed on one side is reported."""

    @dataclasses.dataclass(frozen=True)
    class Renamed:
        start: datetime
        finish: datetime

    fields = model_fields(Renamed)
    assert set(components["Slot"]["properties"]) - set(fields) == {"end", "seatsRemaining"}
    assert mismatch(int, components["Slot"]["properties"]["start"]) is not None
    assert mismatch(str, {"type": "string", "nullable": True}) is not None
