"""Background processes (Celery worker and beat). Their tasks arrive with the features that
need them: CalDAV sync, notifications and webhooks. Tasks stay thin and call app.services."""
