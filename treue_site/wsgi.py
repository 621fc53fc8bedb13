"""WSGI entry point (gunicorn treue_site.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "treue_site.settings")
application = get_wsgi_application()
