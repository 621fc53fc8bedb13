from django.urls import path

from monitoring import views
from monitoring.views import dashboard

app_name = "monitoring"
urlpatterns = [
    # Team leads land on the overview, everyone else on the answers.
    path("", dashboard.home, name="home"),
    path("answers/", views.answer_list, name="answer_list"),
    path("overview/", dashboard.overview, name="overview"),
    path("answers/export.csv", views.answer_export, name="answer_export"),
    path("answers/export.xlsx", views.answer_export_xlsx, name="answer_export_xlsx"),
    path("answers/<int:pk>/", views.answer_detail, name="answer_detail"),
    path("answers/<int:pk>/record.json", views.answer_record, name="answer_record"),
    path("answers/<int:pk>/rescore/", views.answer_rescore, name="answer_rescore"),
    path(
        "answers/<int:pk>/runs/<int:run_pk>/retry/", views.judge_run_retry,
        name="judge_run_retry",
    ),
    path("use-cases/<slug:slug>/", dashboard.use_case, name="use_case"),
    path("use-cases/<slug:slug>/settings/", dashboard.use_case_tune, name="use_case_tune"),
    path("use-cases/<slug:slug>/judge/", views.use_case_judge, name="use_case_judge"),
    path("use-cases/<slug:slug>/judge/mode/", views.use_case_judge_mode,
         name="use_case_judge_mode"),
    path("use-cases/<slug:slug>/judge/evidence/", views.use_case_judge_evidence,
         name="use_case_judge_evidence"),
    path(
        "use-cases/<slug:slug>/judge/rescore/", views.use_case_rescore_week,
        name="use_case_rescore_week",
    ),
    path(
        "use-cases/<slug:slug>/judge/retry-failed/", views.use_case_retry_failed,
        name="use_case_retry_failed",
    ),
]
