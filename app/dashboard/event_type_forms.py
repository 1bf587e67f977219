"""The event type form. It only turns text into numbers and a profile id; what a value may be
(ranges, lengths, unique names, the sub account's profiles) is
``app.services.availability.event_types``'s to say, next to the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import request
from flask_wtf import FlaskForm
from wtforms import (
    BooleanField,
    FieldList,
    Form,
    FormField,
    IntegerField,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import InputRequired, Optional

from app.dashboard.forms import BookingLimitsForm, limits_of, reminder_rows, reminders_of_rows
from app.models import AvailabilityProfile, EventTypeHost, Host, HostAssignment, LocationKind
from app.scheduling.round_robin import PRIORITY_DEFAULT, WEIGHT_DEFAULT
from app.services.availability.questions import QUESTIONS_MAX, QuestionType

# Service document field → form field.
FIELDS = {
    "name": "name",
    "duration": "duration",
    "bufferBefore": "buffer_before",
    "bufferAfter": "buffer_after",
    "slotInterval": "slot_interval",
    "location": "location",
    "locationKind": "location_kind",
    "seats": "seats",
    "availabilityProfileId": "availability_profile_id",
    "minimumNoticeMinutes": "minimum_notice_minutes",
    "bookingHorizonDays": "booking_horizon_days",
    "assignment": "assignment",
    "hostId": "host_id",
    "hosts": "assignment",
    "maxAhead": "max_ahead",
}

# Empty question rows under the filled ones: room to add questions (save for more).
BLANK_QUESTION_ROWS = 3

QUESTION_TYPE_LABELS = {
    QuestionType.TEXT: "Text",
    QuestionType.EMAIL: "Email address",
    QuestionType.PHONE: "Phone number",
    QuestionType.NUMBER: "Number",
    QuestionType.BOOLEAN: "Yes or no",
    QuestionType.SELECT: "One of the options",
}

WHOLE_NUMBER = "Enter a whole number."


def _number(text: str | None, default: int) -> int:
    """A typed number, or ``default`` when left empty (the service says what is too big)."""
    try:
        return int(text) if text not in (None, "") else default
    except ValueError:
        return -1  # refused by the service's range, next to the team table


def optional_id(value: Any) -> int | None:
    """A select's value: empty is "none chosen", anything else must be a number."""
    if value is None or value == "":
        return None
    return int(value)


def _assignment_value(value: Any) -> str:
    return value.value if isinstance(value, HostAssignment) else str(value)


@dataclass(frozen=True)
class TeamRow:
    """One host's row in the form's team table: listed or not, its priority and weight."""

    host_id: int
    name: str
    listed: bool
    priority: int
    weight: int


def _kind_value(value: Any) -> str:
    """A location kind as the form shows it (the model's member or the posted text)."""
    return value.value if isinstance(value, LocationKind) else str(value)


def _minutes(label: str, **kwargs: Any) -> IntegerField:
    return IntegerField(label, invalid_value_message=WHOLE_NUMBER, **kwargs)


class QuestionRowForm(Form):
    """One question a booking is asked (``app.services.availability.questions``). The
    document's ``label`` and ``type`` are ``question`` and ``answer`` here (a row's own
    ``label`` and ``type`` are WTForms'); ``process`` reads a stored question so."""

    question = StringField("Question (empty it to remove the question)")
    key = StringField("Key agents answer it under (empty: made from the question)")
    answer = SelectField(
        "Answer",
        choices=[SelectChoice(kind.value, label) for kind, label in QUESTION_TYPE_LABELS.items()],
        default=QuestionType.TEXT.value,
        validate_choice=False,
    )
    required = BooleanField("Required")
    options = TextAreaField("Options, one per line (for “One of the options”)")

    def process(
        self, formdata: Any = None, obj: Any = None, data: Any = None, **kwargs: Any
    ) -> None:
        """A stored question's words, type and options (as lines) in the row's fields."""
        if "label" in kwargs:
            kwargs["question"] = kwargs.pop("label")
        if "type" in kwargs:
            kwargs["answer"] = kwargs.pop("type")
        options = kwargs.get("options")
        if isinstance(options, list):
            kwargs["options"] = "\n".join(options)
        super().process(formdata, obj, data, **kwargs)


def question_key(label: str) -> str:
    """A key made from a question's words when none is typed: lower-case letters, digits and
    underscores, starting with a letter ("Date of birth" → ``date_of_birth``)."""
    words = "".join(c if c.isascii() and c.isalnum() else " " for c in label.lower()).split()
    key = "_".join(words)[:40].rstrip("_")
    return key if key[:1].isalpha() else f"q_{key}"[:40].rstrip("_")


def questions_of_rows(rows: FieldList) -> list[dict[str, Any]]:
    """The rows a person filled in, as the service's question list. A row without its question
    is no question (emptying the words removes it, whatever its key says); a key made from the
    words is made unique among the rows' (``date_of_birth``, ``date_of_birth_2``)."""
    filled = [row for row in rows if (row.question.data or "").strip()]
    typed = {(row.key.data or "").strip() for row in filled} - {""}
    questions = []
    for row in filled:
        label = row.question.data.strip()
        key = (row.key.data or "").strip()
        if not key:
            key = made = question_key(label)
            suffix = 2
            while key in typed:
                key = f"{made[:37]}_{suffix}"
                suffix += 1
            typed.add(key)
        questions.append(
            {
                "key": key,
                "label": label,
                "type": row.answer.data,
                "required": bool(row.required.data),
                "options": [
                    line.strip() for line in (row.options.data or "").splitlines() if line.strip()
                ],
            }
        )
    return questions


class EventTypeForm(FlaskForm):
    # Field names are the model's, so an event type fills the form (``obj=``).
    name = StringField("Name", validators=[InputRequired("Enter a name.")])
    duration = _minutes("Duration (minutes)", validators=[InputRequired(WHOLE_NUMBER)])
    buffer_before = _minutes("Buffer before (minutes)", default=0, validators=[Optional()])
    buffer_after = _minutes("Buffer after (minutes)", default=0, validators=[Optional()])
    slot_interval = _minutes(
        "Slot interval (minutes; empty: the duration)", validators=[Optional()]
    )
    location_kind = SelectField(
        "Where it happens",
        choices=[
            SelectChoice(LocationKind.IN_PERSON.value, "In person (the location is the address)"),
            SelectChoice(LocationKind.PHONE.value, "Phone (the location is the number)"),
            SelectChoice(LocationKind.GOOGLE_MEET.value, "Google Meet (a link made per booking)"),
            SelectChoice(
                LocationKind.MICROSOFT_TEAMS.value, "Microsoft Teams (a link made per booking)"
            ),
            SelectChoice(LocationKind.LINK.value, "A fixed link (the location is the link)"),
        ],
        coerce=_kind_value,
        default=LocationKind.IN_PERSON.value,
        validate_choice=False,
    )
    location = StringField("Location (optional)")
    seats = _minutes(
        "Seats (how many bookings one slot takes; empty or 1: one booking a slot)",
        default=1,
        validators=[Optional()],
    )
    availability_profile_id = SelectField(
        "Availability profile", coerce=optional_id, validate_choice=False
    )
    assignment = SelectField(
        "Who it is booked with",
        choices=[
            SelectChoice(HostAssignment.SINGLE.value, "One host"),
            SelectChoice(
                HostAssignment.ROUND_ROBIN.value,
                "Round robin: one free host of the team per booking",
            ),
            SelectChoice(HostAssignment.COLLECTIVE.value, "Collective: every host of the team"),
        ],
        coerce=_assignment_value,
        default=HostAssignment.SINGLE.value,
        validate_choice=False,
    )
    host_id = SelectField("Its host (one host)", coerce=optional_id, validate_choice=False)
    max_ahead = _minutes(
        "Round robin: skip a host this many bookings ahead of the least-booked (optional)",
        validators=[Optional()],
    )
    minimum_notice_minutes = _minutes("Minimum notice (minutes)", validators=[Optional()])
    booking_horizon_days = _minutes("Booking horizon (days ahead)", validators=[Optional()])
    booking_limits = FormField(BookingLimitsForm, "Caps of this event type")
    own_reminders = BooleanField("Reminders of its own (else the calendar settings' apply)")
    reminders = reminder_rows("Its reminders")
    questions = FieldList(FormField(QuestionRowForm), "Questions asked at booking")

    def show_questions(self, questions: list[dict[str, Any]]) -> None:
        """The event type's questions in the rows, and blank rows to add more."""
        self.questions.process(None, questions)
        for _ in range(min(BLANK_QUESTION_ROWS, QUESTIONS_MAX - len(questions))):
            self.questions.append_entry()

    def show_reminders(self, reminders: list[dict] | None) -> None:
        """The event type's own list in the rows (none: the calendar settings' apply)."""
        self.own_reminders.data = reminders is not None
        self.reminders.process(None, reminders or [])

    def offer_hosts(self, hosts: list[Host], listed: list[EventTypeHost]) -> list[TeamRow]:
        """The sub account's active hosts to choose from, and the team table's rows: as posted,
        else as the event type lists them."""
        self.host_id.choices = [SelectChoice(str(h.id), h.name) for h in hosts if h.active]
        posted = request.method == "POST"
        kept = {row.host_id: row for row in listed}
        rows = []
        for host in hosts:
            if not host.active and host.id not in kept:
                continue
            if posted:
                rows.append(
                    TeamRow(
                        host.id,
                        host.name,
                        str(host.id) in request.form.getlist("team_host"),
                        _number(request.form.get(f"priority_{host.id}"), PRIORITY_DEFAULT),
                        _number(request.form.get(f"weight_{host.id}"), WEIGHT_DEFAULT),
                    )
                )
            else:
                row = kept.get(host.id)
                rows.append(
                    TeamRow(
                        host.id,
                        host.name,
                        row is not None,
                        row.priority if row else PRIORITY_DEFAULT,
                        row.weight if row else WEIGHT_DEFAULT,
                    )
                )
        self.team_rows = rows
        return rows

    def offer_profiles(self, profiles: list[AvailabilityProfile]) -> None:
        """The sub account's profiles to choose from, after "the default"."""
        default = next((p.name for p in profiles if p.is_default), None)
        label = f"The default profile ({default})" if default else "The default profile"
        self.availability_profile_id.choices = [
            SelectChoice("", label),
            *(SelectChoice(str(p.id), p.name) for p in profiles),
        ]

    def document(self, had_own_reminders: bool = False) -> dict[str, Any]:
        """The service's document; blank buffers and seats are the schema's default (none), blank
        location is none.

        The reminders are the type's own when "Reminders of its own" is ticked, and also when a
        reminder is filled in on a type that followed the calendar settings (``had_own_reminders``
        false): a person who fills one in means it, and a reminder dropped because a box was
        left unticked would be lost without a word. Unticking the box of a type that had its
        own (``had_own_reminders``) gives it the calendar settings' again, its rows as they
        are."""
        document = {name: getattr(self, field).data for name, field in FIELDS.items()}
        document["name"] = (document["name"] or "").strip()
        document["location"] = (document["location"] or "").strip() or None
        for name in ("bufferBefore", "bufferAfter", "seats"):
            if document[name] is None:
                del document[name]
        document["bookingLimits"] = limits_of(self.booking_limits)
        document["hosts"] = (
            []
            if document["assignment"] == HostAssignment.SINGLE.value
            else [
                {"hostId": row.host_id, "priority": row.priority, "weight": row.weight}
                for row in getattr(self, "team_rows", [])
                if row.listed
            ]
        )
        document["questions"] = questions_of_rows(self.questions)
        filled = reminders_of_rows(self.reminders)
        own = self.own_reminders.data or (bool(filled) and not had_own_reminders)
        document["reminders"] = filled if own else None
        return document
