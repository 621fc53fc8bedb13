"""The team leads' pages: the overview, a use case's page and its settings, the answer explorer
with its exports, an answer's page. Their names are in the "monitoring" namespace
(treue_site/urls.py), the one they had when they were the monitoring app's."""

from django.urls import path

from dashboard.views import answers, pages

urlpatterns = [
    # Team leads land on the overview, everyone else on the answers.
    path("", pages.home, name="home"),
    path("answers/", answers.answer_list, name="answer_list"),
    path("overview/", pages.overview, name="overview"),
    path("answers/export.csv", answers.answer_export, name="answer_export"),
    path("answers/export.xlsx", answers.answer_export_xlsx, name="answer_export_xlsx"),
    path("answers/<int:pk>/", answers.answer_detail, name="answer_detail"),
    path("answers/<int:pk>/record.json", answers.answer_record, name="answer_record"),
    path("answers/<int:pk>/rescore/", answers.answer_rescore, name="answer_rescore"),
    path("answers/<int:pk>/judge/", answers.answer_judge_on_demand,
         name="answer_judge_on_demand"),
    path(
        "answers/<int:pk>/runs/<int:run_pk>/retry/", answers.judge_run_retry,
        name="judge_run_retry",
    ),
    path("use-cases/<slug:slug>/", pages.use_case, name="use_case"),
    path("use-cases/<slug:slug>/settings/", pages.use_case_tune, name="use_case_tune"),
    path("use-cases/<slug:slug>/segment-keys/", pages.use_case_segment_keys,
         name="use_case_segment_keys"),
]
