"""Treue's Django project: settings, URL routes and the Celery app."""

from .celery import app as celery_app

__all__ = ["celery_app"]
