from django.urls import path

from review import views

app_name = "review"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("items/<int:pk>/", views.item, name="item"),
    path("items/<int:pk>/save/", views.item_save, name="item_save"),
    path("items/<int:pk>/submit/", views.item_submit, name="item_submit"),
    path("items/<int:pk>/reopen/", views.item_reopen, name="item_reopen"),
    path("calibration/<slug:slug>/", views.calibration, name="calibration"),
    path("calibration/<slug:slug>/reviews/", views.calibration_reviews,
         name="calibration_reviews"),
    path("calibration/<slug:slug>/reviews/<int:pk>/", views.calibration_review,
         name="calibration_review"),
    path("calibration/<slug:slug>/judges/", views.judges, name="judges"),
    path("calibration/<slug:slug>/judges/<int:pk>/", views.judge_comparison,
         name="judge_comparison"),
    path("calibration/<slug:slug>/judges/<int:pk>/adopt/", views.judge_comparison_adopt,
         name="judge_comparison_adopt"),
]
