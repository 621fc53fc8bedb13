from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from monitoring import views
from monitoring.api import api
from monitoring.views import metrics

urlpatterns = [
    path("api/v1/", api.urls),
    path("health", views.health, name="health"),
    path("metrics", metrics.metrics, name="metrics"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("review/", include("review.urls")),
    path("investigations/", include("investigations.urls")),
    path("", include("monitoring.urls")),
]
