"""The command line's entry point: ``celery -A worker worker`` and ``celery -A worker beat``
find ``app`` here. Building the Flask app belongs to this entry point only, never to a task
module."""

from app import create_app

flask_app = create_app()
app = flask_app.extensions["celery"]
