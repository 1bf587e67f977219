"""Event type pages: the list with each eventTypeId, creating, editing, deactivating and
reactivating, refusals next to their fields (never a 500), other sub accounts' ids (404), and
forms without their CSRF token (nothing changes)."""

from __future__ import annotations

import html
import re

import pytest

from app.extensions import db
from app.models import EventType
from tests.dashboard_users import csrf_token


def base(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/event-types"


def form_data(**overrides) -> dict:
    data = {
        "name": "Consultation",
        "duration": "45",
        "buffer_before": "5",
        "buffer_after": "10",
        "slot_interval": "15",
        "location": "Room 2",
        "availability_profile_id": "",
        "minimum_notice_minutes": "",
        "booking_horizon_days": "",
    }
    return {**data, **overrides}


def create(client, tenant, **overrides):
    token = csrf_token(client, f"{base(tenant)}/new")
    return client.post(f"{base(tenant)}/new", data={**form_data(**overrides), "csrf_token": token})


def stored(event_type_id: int) -> EventType:
    db.session.expire_all()
    return db.session.get(EventType, event_type_id)


def named(tenant, name: str) -> EventType | None:
    db.session.expire_all()
    return (
        db.session.query(EventType)
        .filter_by(sub_account_id=tenant.sub_account_id, name=name)
        .first()
    )


def error_next_to(page: str, field_id: str) -> str:
    """The message shown under the input ``field_id``."""
    found = re.search(rf'<p class="error" id="{field_id}-errors">([^<]*)</p>', page)
    assert found, f"no error shown for {field_id}"
    return html.unescape(found.group(1))


def test_the_list_shows_each_event_type_with_its_event_type_id(signed_in, tenant):
    page = signed_in.get(base(tenant)).get_data(as_text=True)
    for name, event_type_id in tenant.event_types.items():
        assert name in page
        assert f"<code>{event_type_id}</code>" in page
    assert "eventTypeId" in page


def test_an_owner_creates_an_event_type_and_sees_its_id(signed_in, tenant):
    office = tenant.raw["agencies"][0]["subAccounts"][0]["availabilityProfiles"]["Office"]
    response = create(
        signed_in, tenant, availability_profile_id=str(office), minimum_notice_minutes="120"
    )
    assert response.status_code == 302
    created = named(tenant, "Consultation")
    assert (created.duration, created.buffer_before, created.buffer_after) == (45, 5, 10)
    assert (created.slot_interval, created.location) == (15, "Room 2")
    assert created.availability_profile_id == office
    assert (created.minimum_notice_minutes, created.booking_horizon_days) == (120, None)
    assert created.active
    page = signed_in.get(base(tenant)).get_data(as_text=True)
    assert f"Agents book it with eventTypeId {created.id}" in page
    assert f"<code>{created.id}</code>" in page


def test_empty_buffers_mean_none_and_empty_overrides_leave_the_calendar_settings(signed_in, tenant):
    create(signed_in, tenant, buffer_before="", buffer_after="", slot_interval="", location="")
    created = named(tenant, "Consultation")
    assert (created.buffer_before, created.buffer_after, created.slot_interval) == (0, 0, None)
    assert created.location is None and created.availability_profile_id is None


def test_an_owner_edits_an_event_type(signed_in, tenant):
    event_type_id = tenant.event_types["Checkup"]
    page = f"{base(tenant)}/{event_type_id}"
    assert 'value="Checkup"' in signed_in.get(page).get_data(as_text=True)
    token = csrf_token(signed_in, page)
    response = signed_in.post(
        page,
        data={
            **form_data(name="Long checkup", duration="90", booking_horizon_days="30"),
            "csrf_token": token,
        },
    )
    assert response.status_code == 302
    edited = stored(event_type_id)
    assert (edited.name, edited.duration, edited.booking_horizon_days) == ("Long checkup", 90, 30)


def test_an_event_type_gets_reminders_of_its_own_and_gives_them_back(signed_in, tenant):
    event_type_id = tenant.event_types["Checkup"]
    page = f"{base(tenant)}/{event_type_id}"
    own = {
        "own_reminders": "y",
        "reminders-0-minutesBefore": "1440",
        "reminders-0-channels": "attendeeEmail",
        "reminders-1-minutesBefore": "60",
        "reminders-1-channels": "webhook",
    }
    data = {**form_data(name="Checkup"), **own, "csrf_token": csrf_token(signed_in, page)}
    assert signed_in.post(page, data=data).status_code == 302
    assert stored(event_type_id).reminders == [
        {"minutesBefore": 1440, "channels": ["attendeeEmail"]},
        {"minutesBefore": 60, "channels": ["webhook"]},
    ]
    shown = signed_in.get(page).get_data(as_text=True)
    assert 'name="reminders-1-minutesBefore" type="number" value="60"' in shown
    data = {**form_data(name="Checkup"), "csrf_token": csrf_token(signed_in, page)}
    assert signed_in.post(page, data=data).status_code == 302
    assert stored(event_type_id).reminders is None  # the calendar settings' again


def test_a_reminder_filled_in_without_the_box_ticked_is_the_event_types_own(signed_in, tenant):
    """Left unticked, the box would drop the reminder without a word (issue 48)."""
    event_type_id = tenant.event_types["Checkup"]
    page = f"{base(tenant)}/{event_type_id}"
    filled = {"reminders-0-minutesBefore": "90", "reminders-0-channels": "attendeeEmail"}
    data = {**form_data(name="Checkup"), **filled, "csrf_token": csrf_token(signed_in, page)}
    assert signed_in.post(page, data=data).status_code == 302
    assert stored(event_type_id).reminders == [{"minutesBefore": 90, "channels": ["attendeeEmail"]}]


def test_unticking_the_box_gives_the_calendar_settings_back_with_the_rows_still_filled(
    signed_in, tenant
):
    """The page shows a type's own reminders in the rows: unticking the box is the choice."""
    event_type_id = tenant.event_types["Checkup"]
    page = f"{base(tenant)}/{event_type_id}"
    filled = {"reminders-0-minutesBefore": "90", "reminders-0-channels": "attendeeEmail"}
    own = {**form_data(name="Checkup"), **filled, "own_reminders": "y"}
    signed_in.post(page, data={**own, "csrf_token": csrf_token(signed_in, page)})
    unticked = {**form_data(name="Checkup"), **filled, "csrf_token": csrf_token(signed_in, page)}
    assert signed_in.post(page, data=unticked).status_code == 302
    assert stored(event_type_id).reminders is None


def test_an_event_type_is_deactivated_and_reactivated(signed_in, tenant):
    event_type_id = tenant.event_types["Cleaning"]
    token = csrf_token(signed_in, base(tenant))
    signed_in.post(f"{base(tenant)}/{event_type_id}/deactivate", data={"csrf_token": token})
    assert stored(event_type_id).active is False
    page = signed_in.get(base(tenant)).get_data(as_text=True)
    assert "Cleaning is deactivated" in page and "Reactivate<span" in page
    signed_in.post(f"{base(tenant)}/{event_type_id}/reactivate", data={"csrf_token": token})
    assert stored(event_type_id).active is True


def test_a_deactivated_event_type_is_no_longer_offered_to_agents(client, signed_in, tenant):
    event_type_id = tenant.event_types["Cleaning"]
    token = csrf_token(signed_in, base(tenant))
    signed_in.post(f"{base(tenant)}/{event_type_id}/deactivate", data={"csrf_token": token})
    response = client.get(
        "/v1/api/calendar/availability",
        query_string={
            "startDate": "2030-01-07",
            "endDate": "2030-01-07",
            "eventTypeId": event_type_id,
        },
        headers=tenant.headers(),
    )
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("duration", "99999999999999999999", "less than or equal to 1440"),
        ("duration", "abc", "Enter a whole number."),
        ("duration", "-30", "greater than or equal to 5"),
        ("duration", "", "Enter a whole number."),
        ("buffer_before", "99999999999999999999", "less than or equal to 1440"),
        ("buffer_after", "-1", "greater than or equal to 0"),
        ("slot_interval", "2", "greater than or equal to 5"),
        ("minimum_notice_minutes", "99999999999999999999", "less than or equal to 525600"),
        ("booking_horizon_days", "0", "greater than or equal to 1"),
        ("booking_horizon_days", "1.5", "Enter a whole number."),
        ("name", "", "Enter a name."),
        ("name", "x" * 10_000, "Length must be between 1 and 255."),
        ("name", "Cleaning", "Duplicate name 'Cleaning'."),
        ("location", "y" * 501, "Longer than maximum length 500."),
        ("availability_profile_id", "99999999999999999999", "Unknown availability profile."),
        ("availability_profile_id", "abc", "could not coerce"),
    ],
)
def test_an_invalid_value_is_explained_next_to_its_field(signed_in, tenant, field, value, message):
    response = create(signed_in, tenant, **{field: value})
    assert response.status_code == 200
    assert message in error_next_to(response.get_data(as_text=True), field)
    assert named(tenant, "Consultation") is None


def test_another_sub_accounts_profile_is_unknown_here(signed_in, tenants, tenant):
    theirs = tenants.create()
    their_profile = theirs.raw["agencies"][0]["subAccounts"][0]["availabilityProfiles"]["Office"]
    response = create(signed_in, tenant, availability_profile_id=str(their_profile))
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert error_next_to(page, "availability_profile_id") == "Unknown availability profile."


def test_an_edit_keeping_its_own_name_is_not_a_duplicate(signed_in, tenant):
    event_type_id = tenant.event_types["Checkup"]
    page = f"{base(tenant)}/{event_type_id}"
    token = csrf_token(signed_in, page)
    renamed = signed_in.post(page, data={**form_data(name="Cleaning"), "csrf_token": token})
    assert "Duplicate name" in error_next_to(renamed.get_data(as_text=True), "name")
    kept = signed_in.post(page, data={**form_data(name="Checkup"), "csrf_token": token})
    assert kept.status_code == 302 and stored(event_type_id).duration == 45


def test_an_invalid_edit_changes_nothing(signed_in, tenant):
    event_type_id = tenant.event_types["Checkup"]
    page = f"{base(tenant)}/{event_type_id}"
    token = csrf_token(signed_in, page)
    response = signed_in.post(page, data={**form_data(duration="0"), "csrf_token": token})
    assert response.status_code == 200
    assert (stored(event_type_id).name, stored(event_type_id).duration) == ("Checkup", 60)


def test_another_sub_accounts_event_type_is_not_found(signed_in, tenants, tenant):
    theirs = tenants.create()
    their_id = theirs.event_types["Cleaning"]
    assert signed_in.get(f"{base(tenant)}/{their_id}").status_code == 404
    token = csrf_token(signed_in, base(tenant))
    edit = signed_in.post(f"{base(tenant)}/{their_id}", data={**form_data(), "csrf_token": token})
    assert edit.status_code == 404
    deactivate = signed_in.post(f"{base(tenant)}/{their_id}/deactivate", data={"csrf_token": token})
    assert deactivate.status_code == 404
    assert stored(their_id).name == "Cleaning" and stored(their_id).active


def test_an_id_too_large_to_exist_is_not_found(signed_in, tenant):
    assert signed_in.get(f"{base(tenant)}/99999999999999999999").status_code == 404
    huge_sub_account = "/dashboard/s/99999999999999999999/event-types"
    assert signed_in.get(huge_sub_account).status_code == 404


def test_a_create_without_its_csrf_token_changes_nothing(signed_in, tenant):
    response = signed_in.post(f"{base(tenant)}/new", data=form_data())
    assert response.status_code == 400
    assert "did not come from this site" in response.get_data(as_text=True)
    assert named(tenant, "Consultation") is None


def test_an_edit_or_deactivation_without_its_csrf_token_changes_nothing(signed_in, tenant):
    event_type_id = tenant.event_types["Checkup"]
    signed_in.post(f"{base(tenant)}/{event_type_id}", data=form_data(name="Renamed"))
    signed_in.post(f"{base(tenant)}/{event_type_id}/deactivate")
    unchanged = stored(event_type_id)
    assert (unchanged.name, unchanged.active) == ("Checkup", True)


def test_an_owner_writes_questions_and_agents_read_them(signed_in, tenant):
    response = create(
        signed_in,
        tenant,
        **{
            "questions-0-question": "Date of birth",
            "questions-0-key": "",
            "questions-0-answer": "text",
            "questions-0-required": "y",
            "questions-0-options": "",
            "questions-1-question": "Service",
            "questions-1-key": "service",
            "questions-1-answer": "select",
            "questions-1-options": "Cut\r\nColour\r\n",
            "questions-2-question": "",
            "questions-2-key": "",
            "questions-2-answer": "text",
            "questions-2-options": "",
        },
    )
    assert response.status_code == 302
    created = named(tenant, "Consultation")
    assert created.questions == [
        {
            "key": "date_of_birth",
            "label": "Date of birth",
            "type": "text",
            "required": True,
            "options": [],
        },
        {
            "key": "service",
            "label": "Service",
            "type": "select",
            "required": False,
            "options": ["Cut", "Colour"],
        },
    ]
    page = signed_in.get(f"{base(tenant)}/{created.id}").get_data(as_text=True)
    assert 'value="date_of_birth"' in page and "Colour" in page
    assert 'name="questions-4-question"' in page  # blank rows to add more


def test_a_select_question_without_options_is_refused_with_the_form_kept(signed_in, tenant):
    response = create(
        signed_in,
        tenant,
        **{"questions-0-question": "Service", "questions-0-answer": "select"},
    )
    assert response.status_code == 200
    page = html.unescape(response.get_data(as_text=True))
    assert "A select question needs at least one option." in page
    assert named(tenant, "Consultation") is None


def test_the_booking_page_shows_the_answers_under_their_questions(signed_in, tenant):
    from tests.factories import make_booking, next_monday, ny

    cleaning = db.session.get(EventType, tenant.event_types["Cleaning"])
    cleaning.questions = [
        {"key": "dob", "label": "Date of birth", "type": "text", "required": True, "options": []},
        {"key": "first", "label": "First visit?", "type": "boolean", "required": False},
    ]
    db.session.commit()
    booking = make_booking(
        tenant, ny(next_monday(), 10), responses={"dob": "1980-02-01", "first": True}
    )
    page = signed_in.get(f"/dashboard/s/{tenant.sub_account_id}/bookings/{booking.id}").get_data(
        as_text=True
    )
    assert "<dt>Date of birth</dt><dd>1980-02-01</dd>" in page
    assert "<dt>First visit?</dt><dd>Yes</dd>" in page


def test_emptying_a_questions_words_removes_it_whatever_its_key(signed_in, tenant):
    cleaning = stored(tenant.event_types["Cleaning"])
    cleaning.questions = [
        {"key": "dob", "label": "Date of birth", "type": "text", "required": True, "options": []}
    ]
    db.session.commit()
    path = f"{base(tenant)}/{cleaning.id}"
    token = csrf_token(signed_in, path)
    answer = signed_in.post(
        path,
        data={
            **form_data(name="Cleaning", duration="30"),
            "csrf_token": token,
            "questions-0-question": "",
            "questions-0-key": "dob",
            "questions-0-answer": "text",
        },
    )
    assert answer.status_code == 302
    assert stored(cleaning.id).questions == []


def test_questions_whose_words_give_the_same_key_get_keys_of_their_own(signed_in, tenant):
    answer = create(
        signed_in,
        tenant,
        **{
            "questions-0-question": "生年月日",
            "questions-0-answer": "text",
            "questions-1-question": "名前",
            "questions-1-answer": "text",
        },
    )
    assert answer.status_code == 302
    assert [q["key"] for q in named(tenant, "Consultation").questions] == ["q", "q_2"]
