"""The admin in German: every model the admin shows (registered, or in an inline) and every one
of its columns carries a German name of its own, so no label falls back to the English that
Django derives from the class or field name ("judge run", "prompt tokens")."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib import admin
from django.db import models
from django.test import Client
from django.utils import translation
from django.utils.functional import Promise
from django.utils.text import camel_case_to_spaces

from tests.support.judged import Judge
from tests.support.world import WorldBuilder

# Django's and django-axes' own models come with their own German.
FOREIGN_MODULES = ("django.", "axes.")


def admin_models() -> set[type[models.Model]]:
    """The models of the admin's pages: those registered and those of their inlines."""
    shown: set[type[models.Model]] = set()
    for model, model_admin in admin.site._registry.items():
        if model.__module__.startswith(FOREIGN_MODULES):
            continue
        shown.add(model)
        shown.update(inline.model for inline in model_admin.inlines)
    return shown


def english_labels(model: type[models.Model]) -> list[str]:
    """What of `model` would show under a name Django derived, or one not translated."""
    opts = model._meta
    found = []
    derived_name = camel_case_to_spaces(model.__name__)
    names = {"verbose_name": derived_name, "verbose_name_plural": f"{opts.verbose_name}s"}
    for option, derived in names.items():
        value = getattr(opts, option)
        if option not in opts.original_attrs or str(value) == derived:
            found.append(f"{opts.label} Meta.{option} = {str(value)!r}")
        elif not isinstance(value, Promise):
            found.append(f"{opts.label} Meta.{option} = {value!r} (not through gettext_lazy)")
    for field in opts.concrete_fields:
        if field.auto_created:
            continue
        if str(field.verbose_name) == field.name.replace("_", " "):
            found.append(f"{opts.label}.{field.name}")
        elif not isinstance(field.verbose_name, Promise):
            found.append(f"{opts.label}.{field.name} = {field.verbose_name!r} (not translated)")
    return found


def test_every_model_and_field_of_the_admin_has_a_german_name() -> None:
    shown = admin_models()
    # Not vacuous: the admin's own models and the inline-only ones are among them.
    labels = {model._meta.label for model in shown}
    assert {"monitoring.JudgeRun", "monitoring.Claim", "monitoring.Chunk", "review.ReviewItem",
            "review.ReviewSubmission", "investigations.Question", "alarms.Alarm"} <= labels
    with translation.override("de"):
        offenders = [label for model in shown for label in english_labels(model)]
    assert offenders == [], "without a German verbose_name:\n" + "\n".join(sorted(offenders))


def test_the_leased_job_fields_are_german_in_both_jobs() -> None:
    # The lease fields come from the abstract jobs.models.LeasedJob: one name for both.
    from investigations.models import Question
    from monitoring.models import JudgeRun

    with translation.override("de"):
        for model in (JudgeRun, Question):
            names = {f.name: str(f.verbose_name) for f in model._meta.concrete_fields}
            assert names["lease_token"] == "Reservierungs-Token", model
            assert names["lease_expires_at"] == "reserviert bis", model
            assert names["attempts"] == "Versuche", model
            assert names["not_before"] == "frühestens ab", model
            assert names["error"] == "Fehler", model


def page_text(html: str) -> str:
    """The page's visible text, tags dropped and spaces collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.mark.django_db
def test_a_judge_runs_admin_page_is_labelled_in_german(world_builder: WorldBuilder) -> None:
    judge = world_builder.judge(Judge())
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=1.0)
    service, _ = world_builder.service("pruef-bot", use_case)
    answer = world_builder.judged(
        judge, service, use_case, "a-1", [("Der Behälter wird geprüft.", "GEDECKT"),
                                           ("Alle 5 Jahre.", "UNGEDECKT")],
    )
    assert answer.current_run is not None
    root = world_builder.user("root", superuser=True)
    client = Client(HTTP_ACCEPT_LANGUAGE="de")
    client.force_login(root)

    response = client.get(f"/admin/monitoring/judgerun/{answer.current_run.pk}/change/")
    assert response.status_code == 200
    text = page_text(response.content.decode())
    # The run's own fields and the lease fields it inherits (read-only, "label: value")...
    for label in ("Anlass", "Angefordert von", "Gestartet", "Aufrufe", "Prompt-Token",
                  "Antwort-Token", "Kosten", "Zerlegung (Rohantwort)", "Protokoll der Aufrufe",
                  "Unlesbare Urteile", "Wiederholbar", "Reservierungs-Token", "Reserviert bis",
                  "Frühestens ab", "Versuche", "Fehler"):
        assert f" {label}: " in text, label
    # ... and its claims' inline: the heading, then the column headers in their order.
    assert ("Aussagen Position Text Urteil Antwort des Prüfers Versuche Urteil wiederverwendet "
            "Dauer (ms) Prompt-Token Antwort-Token") in text
    for english in ("Lease token:", "Lease expires at:", "Not before:", "Call log:",
                    "Decomposition raw:", "Prompt tokens", "Completion tokens", "Latency ms",
                    "Raw reply", "Claims"):
        assert english not in text, english

    response = client.get(f"/admin/monitoring/answer/{answer.pk}/change/")
    assert response.status_code == 200
    text = page_text(response.content.decode())
    for label in ("Anwendungsfall", "Dienst", "Externe ID", "Inhalts-Hash",
                  "Log-Wahrscheinlichkeiten", "Grund der Stichprobe", "Auswahlwahrscheinlichkeit",
                  "Aktueller Prüflauf", "Zahl der Abschnitte"):
        assert f" {label}: " in text, label
    assert "Abschnitte Rang Ähnlichkeit Quelle Abschnitts-ID Text" in text
    for english in ("Use case:", "External id:", "Inclusion probability:", "Current run:",
                    "Source chunk id", "Chunks"):
        assert english not in text, english
    # Answers are the record (the weekly rollups count them): the admin cannot delete one.
    assert f"/admin/monitoring/answer/{answer.pk}/delete/" not in response.content.decode()
    assert client.get(f"/admin/monitoring/answer/{answer.pk}/delete/").status_code == 403
    assert client.post("/admin/monitoring/answer/", {
        "action": "delete_selected", "_selected_action": [answer.pk], "post": "yes",
    }).status_code in (200, 302)
    assert type(answer).objects.filter(pk=answer.pk).exists()
