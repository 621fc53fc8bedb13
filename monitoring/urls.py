from django.urls import path

from monitoring import views

app_name = "monitoring"
urlpatterns = [
    path("", views.answer_list, name="answer_list"),
    path("answers/<int:pk>/", views.answer_detail, name="answer_detail"),
]
