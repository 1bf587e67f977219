"""A booking's answers to its event type's questions as people read them: the question's
words, then the answer in words ("Yes", "No", numbers as written). The dashboard's booking page
and the business's mail show them so; the API and webhooks give them by key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def shown_answer(value: Any) -> str:
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def answer_lines(
    questions: Sequence[Mapping[str, Any]], responses: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """``(question, answer)`` for each answer, in the order the questions are asked; an answer
    to a question the event type no longer asks comes last, under its key."""
    labels = {question["key"]: question["label"] for question in questions}
    asked = [key for key in labels if key in responses]
    others = [key for key in responses if key not in labels]
    return [(labels.get(key, key), shown_answer(responses[key])) for key in asked + others]
