"""Routes added to a test's app to exercise the API's shared machinery (body parsing and
validation, the error envelope of an unexpected failure) with no operation of its own."""

from __future__ import annotations

from flask.views import MethodView
from marshmallow import Schema, fields

from app.api.smorest import Blueprint


class EchoSchema(Schema):
    name = fields.String(required=True)


def add_probe_routes(app):
    """Routes that exercise the shared machinery: a JSON body endpoint and one that fails."""
    blp = Blueprint("probe", __name__, url_prefix="/v1/api/probe")

    @blp.route("/echo")
    class Echo(MethodView):
        @blp.arguments(EchoSchema)
        @blp.response(200, EchoSchema)
        def post(self, body):
            return body

    @blp.route("/boom")
    class Boom(MethodView):
        def get(self):
            raise RuntimeError("secret internal detail")

    app.register_blueprint(blp)
