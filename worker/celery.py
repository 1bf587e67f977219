"""The command line's entry point: ``celery -A worker worker`` and ``celery -A worker beat``
find ``app`` here. Building the Flask app belongs to this entry point only, never to a task
module."""

from worker.metrics import count_in_own_folder

count_in_own_folder()  # before the app imports prometheus_client

from app import create_app  # noqa: E402

flask_app = create_app()
app = flask_app.extensions["celery"]
