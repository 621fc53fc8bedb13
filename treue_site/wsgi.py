"""WSGI entry point (gunicorn treue_site.wsgi)."""

import gc
import os

from django.core.wsgi import get_wsgi_application

from common.request_body import ChunkedBodies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "treue_site.settings")


def _api_body_limit(path: str) -> int:
    from ingest.api.parsing import body_limit  # once Django is set up

    return body_limit(path)


application = ChunkedBodies(get_wsgi_application(), limit=_api_body_limit)

# An ingest request builds ~3,000 objects per answer (the parsed JSON); with the default
# thresholds the collector re-scans them many times per batch. Freezing what import created and
# raising the first threshold cut ingest CPU by about a third in bench/ingest.py.
gc.freeze()
gc.set_threshold(50_000, 20, 100)
