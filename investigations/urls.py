from django.urls import path

from investigations import views

app_name = "investigations"
urlpatterns = [
    path("", views.investigation_list, name="list"),
    path("new/", views.investigation_new, name="new"),
    path("<int:pk>/", views.investigation_detail, name="detail"),
    path("<int:pk>/progress.json", views.investigation_progress, name="progress"),
    path("<int:pk>/cancel/", views.investigation_cancel, name="cancel"),
]
