"""The API's published terms (``app.api_terms``) name what the code behind the API enforces.
The module imports nothing, so the permission names are written out there: they must be the
model's, in its order (the dashboard lists them so)."""

from __future__ import annotations

from app.api_terms import PERMISSION_LABELS
from app.models import Permission


def test_every_permission_has_its_label_in_the_models_order():
    assert list(PERMISSION_LABELS) == [permission.value for permission in Permission]
