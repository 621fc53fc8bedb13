"""The two steps of a single sign-on login: to the provider, and back. Both answer 404 while
single sign-on is not configured."""

from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)


def _configured() -> None:
    if not settings.TREUE_OIDC_ENABLED:
        raise Http404


class Start(OIDCAuthenticationRequestView):
    def get(self, request: HttpRequest) -> HttpResponse:
        _configured()
        return super().get(request)


class Callback(OIDCAuthenticationCallbackView):
    def get(self, request: HttpRequest) -> HttpResponse:
        _configured()
        return super().get(request)

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        # A role the provider takes away lasts at most this long in a running session.
        self.request.session.set_expiry(settings.TREUE_OIDC_SESSION_SECONDS)
        return response


class Login(LoginView):
    """The login page, with the single sign-on link when it is configured (a link, not a form:
    the Content-Security-Policy's form-action would block a form that leaves for the
    provider)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_label"] = settings.TREUE_OIDC_LABEL if settings.TREUE_OIDC_ENABLED else ""
        return context
