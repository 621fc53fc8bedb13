"""Request types for the type checker.

Behind `login_required` the request's user is a real `User`, never `AnonymousUser`; views
that require a login take an `AuthenticatedRequest` so that selectors and services can ask for
a `User` (django-stubs' recommended pattern).
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest


class AuthenticatedRequest(HttpRequest):
    user: User
