"""Background processes: the Celery worker and beat (``celery -A worker worker|beat``).

``app.celery_app`` binds a Celery app to the Flask app (``create_app`` calls it, so the web
process can enqueue); ``worker.celery`` is the command line's entry point, which builds the
Flask app and adds the worker's heartbeat (``worker.heartbeat``); ``worker.tasks`` holds the
tasks, thin wrappers around ``app.services``. Importing this package builds nothing, and the
app package never imports it.
"""
