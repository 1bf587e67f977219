"""Background processes: the Celery worker and beat (``celery -A worker worker|beat``).

``worker.celery_setup`` binds a Celery app to the Flask app (``create_app`` calls it, so the web
process can enqueue); ``worker.celery`` is the command line's entry point, which builds the
Flask app; ``worker.tasks`` holds the tasks, thin wrappers around ``app.services``. Importing
this package builds nothing.
"""
