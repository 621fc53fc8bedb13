"""The alarm channels' pages, under a use case's address (staff only)."""

from django.urls import path

from alarms import views

app_name = "alarms"
urlpatterns = [
    path("use-cases/<slug:slug>/alarm-channels/", views.channel_list, name="channels"),
    path("use-cases/<slug:slug>/alarm-channels/<int:pk>/", views.channel_detail, name="channel"),
    path(
        "use-cases/<slug:slug>/alarm-channels/<int:pk>/test/", views.channel_test,
        name="channel_test",
    ),
    path(
        "use-cases/<slug:slug>/alarm-channels/<int:pk>/delete/", views.channel_delete,
        name="channel_delete",
    ),
]
