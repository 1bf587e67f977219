"""The contract's camelCase at the API's edge (``app.api.field_names``): request schemas load
into the services' snake_case names, and a service's refusal leaves in the contract's names."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError, fields

from app.api.availability.schemas import AvailabilityArgsSchema
from app.api.bookings.schemas import BookingListArgsSchema
from app.api.bookings.write_schemas import (
    AttendeeInputSchema,
    CreateBookingSchema,
    UpdateBookingSchema,
)
from app.api.field_names import CamelCaseSchema, ContractNames, camel_case
from app.api.holds.schemas import CreateHoldSchema
from app.services.common.errors import ErrorCode, InvalidRequest, TimeUnavailable


@pytest.mark.parametrize(
    "name, api_name",
    [
        ("start_time", "startTime"),
        ("event_type_id", "eventTypeId"),
        ("ttl_seconds", "ttlSeconds"),
        ("timezone", "timezone"),
        ("metadata", "metadata"),
    ],
)
def test_camel_case(name, api_name):
    assert camel_case(name) == api_name


class Example(CamelCaseSchema):
    start_time = fields.Integer(required=True)
    title = fields.String()
    own_key = fields.String(data_key="ownKEY")


def test_a_camel_case_schema_loads_the_contracts_names_into_the_services():
    assert Example().load({"startTime": 1, "title": "t", "ownKEY": "k"}) == {
        "start_time": 1,
        "title": "t",
        "own_key": "k",
    }


def test_a_camel_case_schema_names_its_errors_as_the_contract_does():
    with pytest.raises(ValidationError) as refused:
        Example().load({"start_time": 1})
    assert refused.value.messages == {
        "startTime": ["Missing data for required field."],
        "start_time": ["Unknown field."],
    }


@pytest.mark.parametrize(
    "schema, api_names",
    [
        (
            AvailabilityArgsSchema,
            {"startDate", "endDate", "eventTypeId", "duration", "timezone", "hostId"},
        ),
        (
            BookingListArgsSchema,
            {"startDate", "endDate", "status", "eventTypeId", "email", "limit", "offset"},
        ),
        (AttendeeInputSchema, {"email", "name", "firstName", "lastName", "phone", "timezone"}),
        (CreateHoldSchema, {"startTime", "endTime", "timezone", "ttlSeconds", "hostId"}),
        (
            CreateBookingSchema,
            {
                "startTime",
                "endTime",
                "attendees",
                "timezone",
                "title",
                "description",
                "metadata",
                "holdToken",
                "idempotencyKey",
                "hostId",
                "responses",
            },
        ),
    ],
)
def test_the_request_schemas_take_the_contracts_names(schema, api_names):
    instance = schema()
    assert {f.data_key or name for name, f in instance.fields.items()} == api_names
    assert all(name == name.lower() for name in instance.fields)  # the services' names


def test_an_update_says_what_was_sent_in_the_services_names():
    changes = UpdateBookingSchema().load({"startTime": "2031-01-06T10:00:00Z", "title": "New"})
    assert changes.sent == {"start_time", "title"}


NAMES = ContractNames(CreateBookingSchema())


def test_a_refusal_naming_a_field_leaves_in_the_contracts_names():
    with pytest.raises(InvalidRequest) as refused, NAMES.told_in_refusals():
        raise InvalidRequest("start_time: no such time", errors={"start_time": ["no such time"]})
    assert (refused.value.message, str(refused.value)) == ("startTime: no such time",) * 2
    assert refused.value.errors == {"startTime": ["no such time"]}


def test_prose_naming_fields_is_told_in_the_contracts_names_and_nothing_else_changes():
    error = TimeUnavailable(
        "idempotency_key, hold_token and end_time; slot_taken", ErrorCode.SLOT_TAKEN
    )
    with pytest.raises(TimeUnavailable) as refused, NAMES.told_in_refusals():
        raise error
    assert refused.value is error
    assert error.message == "idempotencyKey, holdToken and endTime; slot_taken"
    assert (error.code, error.errors, error.suggested_slots) == (ErrorCode.SLOT_TAKEN, None, [])


def test_names_inside_other_words_are_left_alone():
    assert (
        NAMES.told("a_start_time, start_times, start_time.")
        == "a_start_time, start_times, startTime."
    )
