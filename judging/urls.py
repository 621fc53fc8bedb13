"""A use case's judge page: the judge's mode and evidence, rescoring a week, retrying failed
runs. Names in the "monitoring" namespace (treue_site/urls.py), as before the judge had an app."""

from django.urls import path

from judging import views

urlpatterns = [
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
