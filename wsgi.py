"""WSGI entry point: ``gunicorn wsgi:app``; also ``flask --app wsgi …`` for the commands."""

from app import create_app

app = create_app()
