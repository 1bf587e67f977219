"""The OpenAPI document, pinned: a change that means to leave the contract as it is (a
refactor of the schemas, of the services behind them, of how names are mapped at the API's
edge) leaves it byte for byte as it was.

The pin is a SHA-256 of the document as served, key order kept, without what follows the
deployment or the clock: ``info.description`` and ``servers`` name the public address, and the
examples' dates follow today's. A change to the contract itself changes the hash: check the
document's diff, then put the new hash here (the failure prints it)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

PINNED_SHA256 = "82d53b39628527e62a59ea189b1fba3e7951758d92082d98061e555dccb15bcb"


def without_examples(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: without_examples(value)
            for key, value in node.items()
            if key not in ("example", "examples")
        }
    if isinstance(node, list):
        return [without_examples(item) for item in node]
    return node


def document_digest(document: dict[str, Any]) -> str:
    pinned = dict(document)
    pinned["info"] = {k: v for k, v in document["info"].items() if k != "description"}
    pinned.pop("servers", None)
    text = json.dumps(without_examples(pinned), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_document_is_the_pinned_one(client):
    response = client.get("/v1/api/openapi.json")
    assert response.status_code == 200
    # json.loads keeps the served key order, so a field moved within a schema changes it too.
    digest = document_digest(json.loads(response.get_data()))
    assert digest == PINNED_SHA256, f"The OpenAPI document changed: new hash {digest}"


def test_the_digest_ignores_the_address_and_the_examples_only():
    document = {
        "info": {"title": "T", "description": "at https://a.example"},
        "servers": [{"url": "https://a.example"}],
        "paths": {"/x": {"get": {"parameters": [{"name": "d", "example": "2031-01-06"}]}}},
    }
    elsewhere = {
        "info": {"title": "T", "description": "at https://b.example"},
        "servers": [{"url": "https://b.example"}],
        "paths": {"/x": {"get": {"parameters": [{"name": "d", "example": "2031-01-13"}]}}},
    }
    renamed = {**document, "paths": {"/x": {"get": {"parameters": [{"name": "e"}]}}}}
    assert document_digest(document) == document_digest(elsewhere)
    assert document_digest(document) != document_digest(renamed)
