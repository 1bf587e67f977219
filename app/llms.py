"""``GET /llms.txt``: the agents' discovery document, plain-text Markdown. What the service
is, its base URL, authentication, each operation with one worked example, the error codes,
the limits, and where the OpenAPI document and the MCP server are.

Rendered from ``app/templates/llms.txt`` with the base URL from ``PUBLIC_URL``, never from the
request's ``Host`` (a client chooses that). Its examples are the commands of docs/api.md,
which a test runs against a live server; ``tests/api/test_llms_txt.py`` holds the two, and the
error codes, together. Outside ``/v1/api``, so no API key and no rate limit.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, render_template

from app.config import settings

llms_blueprint = Blueprint("llms", __name__)


@llms_blueprint.get("/llms.txt")
def llms_txt() -> Response:
    text = render_template("llms.txt", base_url=settings().base_url)
    return Response(text + "\n", mimetype="text/plain")  # text/plain; charset=utf-8


def register_llms(app: Flask) -> None:
    app.register_blueprint(llms_blueprint)
