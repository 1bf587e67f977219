"""Booking questions: what an event type needs to know of each booking before it is made (a
clinic's date of birth, a salon's service, a sales team's company size), and the check of the
answers a create sends.

An event type keeps its questions as a list of ``{"key", "label", "type", "required",
"options"}`` in the order they are asked (``QuestionDoc``). Agents read them as one JSON Schema
(``responses_schema``), and a create's ``responses`` object is checked against that very schema
by the ``jsonschema`` library (``check_responses``): what an agent is told and what the service
accepts are one document, so they cannot drift apart.

An answer of ``null`` is no answer: an optional question may be left out or sent as null. A key
that is not one of the type's questions is refused, so a misspelt key is not silently dropped.
Answers are stored as checked, by key; a question renamed or removed later leaves the answers of
bookings made before as they were.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError as SchemaError
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from app.models.limits import EMAIL_MAX, NAME_MAX, PHONE_MAX
from app.services.common.errors import ErrorCode, InvalidRequest
from app.validation import NO_NUL_PATTERN, Text, describe_errors, unstorable


class QuestionType(StrEnum):
    """What kind of answer a question takes; each is one JSON Schema shape (``_answer_schema``)."""

    TEXT = "text"
    EMAIL = "email"
    PHONE = "phone"
    NUMBER = "number"
    BOOLEAN = "boolean"
    SELECT = "select"


QUESTIONS_MAX = 20
OPTIONS_MAX = 50
OPTION_MAX = 100
# A free-text answer (a note, an address, a reason for the visit).
TEXT_ANSWER_MAX = 2000
# A key is what an agent sends and a webhook receiver reads: an identifier, not prose.
KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,39}$"
# 4 to 20 digits, an optional leading +, and the separators people write between them.
PHONE_PATTERN = r"^\+?([ ().-]*[0-9]){4,20}[ ().-]*$"
# Answers are numbers JSON carries exactly between any two parsers.
NUMBER_LIMIT = 2**53

RESPONSES_FIELD = "responses"
# What the OpenAPI document says of a ``responses`` object (the create's and the booking's):
# each event type's questions say the rest (``responses_schema``).
RESPONSES_OPENAPI = {
    "maxProperties": QUESTIONS_MAX,
    "additionalProperties": {
        "anyOf": [
            {
                "type": "string",
                "maxLength": TEXT_ANSWER_MAX,
                "pattern": NO_NUL_PATTERN,
                "nullable": True,
            },
            {"type": "number", "minimum": -NUMBER_LIMIT + 1, "maximum": NUMBER_LIMIT - 1},
            {"type": "boolean"},
        ]
    },
}
MISSING = "Required."
UNKNOWN = "Not a question of this event type."


class QuestionDoc(Schema):
    """One question as the dashboard and provisioning write it."""

    key = Text(
        required=True,
        validate=validate.Regexp(
            KEY_PATTERN,
            error=("Letters, digits and underscores, starting with a letter (at most 40)."),
        ),
    )
    label = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    type = fields.Enum(QuestionType, by_value=True, required=True)
    required = fields.Boolean(load_default=False)
    options = fields.List(
        Text(validate=validate.Length(min=1, max=OPTION_MAX)),
        load_default=list,
        validate=validate.Length(max=OPTIONS_MAX),
    )

    @validates_schema
    def options_only_for_select(self, data: dict[str, Any], **kwargs: Any) -> None:
        options = data.get("options", [])
        if data.get("type") is QuestionType.SELECT:
            if not options:
                raise ValidationError("A select question needs at least one option.", "options")
            if len(set(options)) != len(options):
                raise ValidationError("Each option may appear only once.", "options")
        elif options:
            raise ValidationError("Only a select question has options.", "options")


def _distinct_keys(questions: list[dict[str, Any]]) -> None:
    keys = [question["key"] for question in questions]
    if len(set(keys)) != len(keys):
        raise ValidationError("Each question key may appear only once.")


def question_list(**kwargs: Any) -> fields.List:
    """An event type's ``questions`` field: at most ``QUESTIONS_MAX``, keys distinct."""
    return fields.List(
        fields.Nested(QuestionDoc),
        validate=[validate.Length(max=QUESTIONS_MAX), _distinct_keys],
        **kwargs,
    )


def stored_questions(questions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Loaded questions as the event type stores them (plain JSON)."""
    return [
        {
            "key": q["key"],
            "label": q["label"],
            "type": QuestionType(q["type"]).value,
            "required": bool(q["required"]),
            "options": list(q["options"]),
        }
        for q in questions
    ]


def _answer_schema(question: Mapping[str, Any]) -> dict[str, Any]:
    kind = QuestionType(question["type"])
    shape: dict[str, Any] = {"title": question["label"]}
    if kind is QuestionType.TEXT:
        shape |= {"type": "string", "minLength": 1, "maxLength": TEXT_ANSWER_MAX}
    elif kind is QuestionType.EMAIL:
        shape |= {"type": "string", "format": "email", "maxLength": EMAIL_MAX}
    elif kind is QuestionType.PHONE:
        shape |= {"type": "string", "pattern": PHONE_PATTERN, "maxLength": PHONE_MAX}
    elif kind is QuestionType.NUMBER:
        shape |= {"type": "number"}
    elif kind is QuestionType.BOOLEAN:
        shape |= {"type": "boolean"}
    else:
        shape |= {"type": "string", "enum": list(question["options"])}
    return shape


def responses_schema(questions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a create's ``responses`` for these questions: an
    object with one property per question, in the order asked, each titled with its label;
    the required ones listed; no other keys."""
    return {
        "type": "object",
        "properties": {q["key"]: _answer_schema(q) for q in questions},
        "required": [q["key"] for q in questions if q["required"]],
        "additionalProperties": False,
    }


_FORMATS = FormatChecker(formats=())


@_FORMATS.checks("email")
def _is_email(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the type keyword speaks for other values
    try:
        validate.Email()(value)
    except ValidationError:
        return False
    return True


def _problem(error: SchemaError) -> str:
    """The words for one failed keyword of an answer (never echoing the answer back)."""
    keyword, expected = error.validator, error.validator_value
    if keyword == "type":
        return {
            "number": "Must be a number.",
            "boolean": "Must be true or false.",
        }.get(str(expected), "Must be a string.")
    if keyword == "enum":
        options = expected if isinstance(expected, list) else []
        return "Must be one of: " + ", ".join(str(option) for option in options) + "."
    if keyword == "format":
        return "Must be an email address."
    if keyword == "pattern":
        return "Must be a phone number: 4 to 20 digits, with + ( ) . - or spaces."
    if keyword == "maxLength":
        return f"At most {expected} characters."
    if keyword == "minLength":
        return "Must not be empty."
    return "Not a valid answer."


def _value_problem(value: Any) -> str | None:
    """What JSON Schema does not say: text PostgreSQL can store, numbers every reader reads."""
    if isinstance(value, str):
        return unstorable(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "Must be a finite number."
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and abs(value) >= NUMBER_LIMIT
    ):
        return "Must lie within ±2^53."
    return None


def check_responses(
    questions: Sequence[Mapping[str, Any]], responses: Mapping[str, Any]
) -> dict[str, Any]:
    """The answers to keep, in the order the questions are asked; refused with
    ``invalid_responses`` naming each missing, malformed or unknown answer
    (``responses.<key>``)."""
    answered = {key: value for key, value in responses.items() if value is not None}
    schema = responses_schema(questions)
    problems: dict[str, list[str]] = {}
    for key in schema["required"]:
        if key not in answered:
            problems[f"{RESPONSES_FIELD}.{key}"] = [MISSING]
    known = schema["properties"]
    for key in answered:
        if key not in known:
            # A key is echoed only when it is one the field names could be (no markup, no NUL).
            name = key if _plain_key(key) else "?"
            problems.setdefault(f"{RESPONSES_FIELD}.{name}", [UNKNOWN])
    validator = Draft202012Validator(schema, format_checker=_FORMATS)
    for error in validator.iter_errors(answered):
        if error.path:
            problems.setdefault(f"{RESPONSES_FIELD}.{error.path[0]}", [_problem(error)])
    for key, value in answered.items():
        if key in known and (problem := _value_problem(value)) is not None:
            problems.setdefault(f"{RESPONSES_FIELD}.{key}", [problem])
    if problems:
        raise InvalidRequest(
            "Missing or malformed answers: " + describe_errors(problems),
            errors=problems,
            code=ErrorCode.INVALID_RESPONSES,
        )
    return {q["key"]: answered[q["key"]] for q in questions if q["key"] in answered}


def _plain_key(key: str) -> bool:
    return len(key) <= 64 and key.isascii() and key.replace("_", "").replace("-", "").isalnum()
