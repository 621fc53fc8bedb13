from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from dashboard import api as estimates
from dashboard import segments_api
from dashboard import urls as dashboard_urls
from dashboard.views import metrics
from ingest.api import answers, site
from judging import urls as judging_urls
from monitoring import views

# One API, one OpenAPI document: the answers' endpoints and the estimates'.
api = site.api_build(routers=[answers.router, estimates.router, segments_api.router])

urlpatterns = [
    # The OTLP/HTTP receiver: before the API, whose errors and body parsing it does not share.
    path("", include("traces.urls")),  # api/v1/otlp/v1/traces
    path("api/v1/", api.urls),
    path("health", views.health, name="health"),
    path("metrics", metrics.metrics, name="metrics"),
    path("", include("accounts.urls")),  # login/, and oidc/ for single sign-on
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    # Whatever reads no page's <link rel="icon"> asks for /favicon.ico (a browser showing a JSON
    # or text response, bookmarks, crawlers): the site's SVG icon rather than a 404.
    path("favicon.ico", RedirectView.as_view(url=static("img/favicon.svg"), permanent=True),
         name="favicon"),
    # Alarms had their admin list under monitoring before they got their own app.
    re_path(
        r"^admin/monitoring/alarm/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/alarms/alarm/%(rest)s", permanent=True, query_string=True),
        name="admin_alarm_moved",
    ),
    path("admin/", admin.site.urls),
    path("review/", include("review.urls")),
    path("investigations/", include("investigations.urls")),
    path("", include("alarms.urls")),  # use-cases/<slug>/alarm-channels/ (staff)
    # The pages keep the "monitoring" namespace they had when one app held them all.
    path("", include(([*dashboard_urls.urlpatterns, *judging_urls.urlpatterns], "monitoring"))),
]
