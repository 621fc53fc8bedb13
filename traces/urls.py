from django.urls import path

from traces.api import export_traces

urlpatterns = [
    path("api/v1/otlp/v1/traces", export_traces, name="otlp_traces"),
]
