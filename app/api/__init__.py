"""The agent API under /v1/api: one folder per endpoint group, registered from one list."""

from __future__ import annotations

from flask import Flask, Response, send_from_directory

from app.api import examples
from app.api.availability.routes import blp as availability_blp
from app.api.bookings.routes import blp as bookings_blp
from app.api.error_codes import overview
from app.api.event_type_bookings.routes import blp as event_type_bookings_blp
from app.api.event_types.routes import blp as event_types_blp
from app.api.holds.routes import blp as holds_blp
from app.api.key_cache import KeyCache
from app.api.smorest import Api
from app.config import API_PREFIX, settings_of

BLUEPRINTS = [
    availability_blp,
    bookings_blp,
    event_types_blp,
    event_type_bookings_blp,
    holds_blp,
]


def register_api(app: Flask) -> None:
    configured = settings_of(app)
    public_url = configured.base_url
    api = Api(
        app,
        spec_kwargs={
            "info": {"description": overview(public_url)},
            "servers": [{"url": public_url.rstrip("/")}],
        },
    )
    app.extensions["api_key_cache"] = KeyCache(configured.api_key_cache_seconds)
    for blp in BLUEPRINTS:
        api.register_blueprint(blp, url_prefix=API_PREFIX + blp.url_prefix)
    for name, example in examples.by_schema().items():
        api.spec.components.schemas[name]["example"] = example

    assets = app.config["SWAGGER_UI_ASSETS"]

    @app.get(f"{API_PREFIX}/docs/assets/<path:filename>")
    def swagger_ui_assets(filename: str) -> Response:
        """Swagger UI's files, served locally so the docs work without internet access."""
        return send_from_directory(assets, filename, max_age=86400)
