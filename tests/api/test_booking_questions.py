"""Booking questions: an event type's questions, answered in the create's ``responses``
(docs/api.md, "Questions and answers")."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from app.extensions import db
from app.models import EventType
from tests.factories import book_through_api, make_booking, next_monday, ny

MONDAY = next_monday()

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

QUESTIONS = [
    {"key": "dob", "label": "Date of birth", "type": "text", "required": True, "options": []},
    {
        "key": "service",
        "label": "Service",
        "type": "select",
        "required": True,
        "options": ["Cut", "Colour"],
    },
    {"key": "email", "label": "Work email", "type": "email", "required": False, "options": []},
    {"key": "phone", "label": "Mobile", "type": "phone", "required": False, "options": []},
    {"key": "size", "label": "Company size", "type": "number", "required": False, "options": []},
    {"key": "first", "label": "First visit?", "type": "boolean", "required": False, "options": []},
]
ANSWERS = {"dob": "1980-02-01", "service": "Cut"}


@pytest.fixture
def asking(tenant):
    """The tenant, its Cleaning asking ``QUESTIONS``."""
    db.session.get(EventType, tenant.event_types["Cleaning"]).questions = QUESTIONS
    db.session.commit()
    return tenant


def book(client, tenant, hour: int = 10, **fields):
    return book_through_api(client, tenant, ny(MONDAY, hour), **fields)


def test_the_listing_gives_the_questions_as_a_json_schema_the_answers_meet(client, asking):
    (cleaning,) = [
        t
        for t in client.get("/v1/api/calendar/event-types", headers=asking.headers()).json
        if t["name"] == "Cleaning"
    ]
    schema = cleaning["questions"]
    Draft202012Validator.check_schema(schema)
    assert list(schema["properties"]) == ["dob", "service", "email", "phone", "size", "first"]
    assert schema["required"] == ["dob", "service"]
    assert schema["properties"]["service"] == {
        "title": "Service",
        "type": "string",
        "enum": ["Cut", "Colour"],
    }
    assert Draft202012Validator(schema).is_valid(ANSWERS)
    assert not Draft202012Validator(schema).is_valid({"service": "Cut"})


def test_a_booking_with_valid_answers_keeps_them_and_returns_them(client, asking):
    answers = {**ANSWERS, "email": "pat@work.example", "phone": "+1 (212) 555-0100"}
    answers |= {"size": 12, "first": False}
    created = book(client, asking, responses=answers)
    assert created.status_code == 201, created.json
    assert created.json["responses"] == answers
    fetched = client.get(
        f"/v1/api/calendar/bookings/{created.json['id']}", headers=asking.headers()
    )
    assert fetched.json["responses"] == answers
    listed = client.get("/v1/api/calendar/bookings", headers=asking.headers())
    assert listed.json["bookings"][0]["responses"] == answers


def test_a_missing_required_answer_is_refused_naming_it(client, asking):
    refused = book(client, asking, responses={"service": "Cut"})
    assert refused.status_code == 400
    assert refused.json["code"] == "invalid_responses"
    assert refused.json["errors"] == {"responses.dob": ["Required."]}
    assert "responses.dob" in refused.json["message"]


def test_no_responses_at_all_names_every_required_question(client, asking):
    refused = book(client, asking)
    assert refused.json["code"] == "invalid_responses"
    assert set(refused.json["errors"]) == {"responses.dob", "responses.service"}


@pytest.mark.parametrize(
    "answer, problem",
    [
        ({"service": "Perm"}, "Must be one of: Cut, Colour."),
        ({"size": "twelve"}, "Must be a number."),
        ({"first": "yes"}, "Must be true or false."),
        ({"email": "not-an-address"}, "Must be an email address."),
        ({"phone": "call me"}, "Must be a phone number: 4 to 20 digits, with + ( ) . - or spaces."),
        ({"dob": ""}, "Must not be empty."),
        ({"dob": 19800201}, "Must be a string."),
        ({"dob": "x" * 2001}, "At most 2000 characters."),
        ({"dob": "a\x00b"}, "Must not contain NUL characters."),
    ],
)
def test_a_malformed_answer_is_refused_naming_its_question(client, asking, answer, problem):
    refused = book(client, asking, responses={**ANSWERS, **answer})
    assert refused.status_code == 400
    assert refused.json["code"] == "invalid_responses"
    (key,) = answer
    assert refused.json["errors"] == {f"responses.{key}": [problem]}


def test_an_answer_to_no_question_is_refused(client, asking):
    refused = book(client, asking, responses={**ANSWERS, "dateOfBirth": "1980"})
    assert refused.json["errors"] == {
        "responses.dateOfBirth": ["Not a question of this event type."]
    }


def test_null_is_no_answer(client, asking):
    created = book(client, asking, responses={**ANSWERS, "email": None})
    assert created.status_code == 201, created.json
    assert created.json["responses"] == ANSWERS


def test_answers_are_checked_before_the_time(client, asking):
    make_booking(asking, ny(MONDAY, 10))
    refused = book(client, asking, 10, responses={"service": "Cut"})
    assert refused.json["code"] == "invalid_responses"


def test_a_replay_with_other_answers_is_an_idempotency_mismatch(client, asking):
    first = book(client, asking, responses=ANSWERS, idempotencyKey="call-1")
    assert first.status_code == 201
    again = book(client, asking, responses=ANSWERS, idempotencyKey="call-1")
    assert (again.status_code, again.json["id"]) == (201, first.json["id"])
    other = book(
        client, asking, responses={**ANSWERS, "service": "Colour"}, idempotencyKey="call-1"
    )
    assert other.json["code"] == "idempotency_mismatch"


def test_an_event_type_without_questions_takes_no_answers(client, tenant):
    assert book(client, tenant).status_code == 201
    refused = book(client, tenant, 11, responses={"note": "hi"})
    assert refused.json["errors"] == {"responses.note": ["Not a question of this event type."]}
