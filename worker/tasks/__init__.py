"""Celery tasks: thin, idempotent, each calling one service in the task's transaction."""
