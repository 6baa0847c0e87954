"""The example shop's Django project. Importing it loads the Celery app, as Celery's
Django guide recommends, so ``shared_task``s bind to it."""

from .celery import app as celery_app

__all__ = ["celery_app"]
