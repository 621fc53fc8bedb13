"""The management commands create_use_case and create_service."""

import hashlib
import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from monitoring.domain import keys
from monitoring.domain.sample_rate import DEFAULT_SAMPLE_RATE
from monitoring.models import Answer, Service, UseCase
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db


def run(*args, **kwargs):
    out = io.StringIO()
    call_command(*args, stdout=out, **kwargs)
    return out.getvalue()


def test_create_use_case_defaults():
    out = run("create_use_case", "hotline", "--name", "Hotline")
    use_case = UseCase.objects.get(slug="hotline")
    assert use_case.name == "Hotline"
    assert use_case.language == "de"
    assert use_case.sample_rate == DEFAULT_SAMPLE_RATE == 0.03
    assert use_case.logprob_threshold == 0.5
    assert use_case.action_threshold == 0.85
    assert use_case.leaves_unreviewed is False
    assert use_case.active is True
    assert use_case.judge_mode == "batched", "a new use case is judged batched"
    assert "hotline" in out


def test_create_use_case_options():
    run("create_use_case", "sales", "--name", "Sales", "--language", "en",
        "--sample-rate", "0.05", "--unreviewed")
    use_case = UseCase.objects.get(slug="sales")
    assert (use_case.language, use_case.sample_rate, use_case.leaves_unreviewed) == (
        "en", 0.05, True,
    )
    run("create_use_case", "article", "--name", "Article", "--judge-mode", "per-claim")
    assert UseCase.objects.get(slug="article").judge_mode == "per-claim"
    with pytest.raises(CommandError):
        run("create_use_case", "bulk", "--name", "Bulk", "--judge-mode", "bulk")


def test_create_use_case_in_one_call_mode_and_without_evidence():
    # DESIGN: --judge-mode batched|per-claim|single.
    run("create_use_case", "einmal", "--name", "Einmal", "--judge-mode", "single")
    use_case = UseCase.objects.get(slug="einmal")
    assert (use_case.judge_mode, use_case.judge_evidence) == ("single", True)
    run("create_use_case", "knapp", "--name", "Knapp", "--judge-mode", "batched",
        "--no-judge-evidence")
    use_case = UseCase.objects.get(slug="knapp")
    assert (use_case.judge_mode, use_case.judge_evidence) == ("batched", False)


@pytest.mark.parametrize("rate", ["1.0", "0.02", "1e-4"])
def test_create_use_case_accepts_valid_rates(rate):
    run("create_use_case", "ok", "--name", "Ok", "--sample-rate", rate)
    assert UseCase.objects.get(slug="ok").sample_rate == float(rate)


@pytest.mark.parametrize("rate", ["0", "1.5", "nan", "-0.1", "inf", "-inf", "1.0001"])
def test_create_use_case_rejects_invalid_rate(rate):
    with pytest.raises(CommandError, match="sample_rate"):
        run("create_use_case", "bad", "--name", "Bad", f"--sample-rate={rate}")
    assert not UseCase.objects.filter(slug="bad").exists()


@pytest.mark.parametrize("option", ["logprob-threshold", "action-threshold"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-0.1", "1.5"])
def test_create_use_case_rejects_invalid_thresholds(option, value):
    # NaN passes every comparison: a threshold of NaN would flag nothing, silently.
    with pytest.raises(CommandError, match=option.replace("-", "_")):
        run("create_use_case", "bad", "--name", "Bad", f"--{option}={value}")
    assert not UseCase.objects.filter(slug="bad").exists()


def test_create_use_case_rejects_non_number_rate():
    with pytest.raises(CommandError):
        run("create_use_case", "bad", "--name", "Bad", "--sample-rate", "drei")
    assert not UseCase.objects.exists()


def test_create_use_case_rejects_duplicate_slug():
    run("create_use_case", "dup", "--name", "First")
    with pytest.raises(CommandError, match="already exists"):
        run("create_use_case", "dup", "--name", "Second")
    assert list(UseCase.objects.filter(slug="dup").values_list("name", flat=True)) == ["First"]


@pytest.mark.parametrize("slug", ["mit leerzeichen", "umlaut-ä", "a/b"])
def test_create_use_case_rejects_invalid_slug(slug):
    with pytest.raises(CommandError):
        run("create_use_case", slug, "--name", "X")
    assert not UseCase.objects.exists()


def test_create_use_case_rejects_unknown_language():
    with pytest.raises(CommandError):
        run("create_use_case", "fr", "--name", "Fr", "--language", "fr")
    assert not UseCase.objects.exists()


def test_create_use_case_assigns_experts_and_rejects_unknown_user(django_user_model):
    django_user_model.objects.create_user("erika", password="x")
    run("create_use_case", "team", "--name", "Team", "--expert", "erika")
    assert list(UseCase.objects.get(slug="team").experts.values_list("username", flat=True)) == [
        "erika"
    ]
    with pytest.raises(CommandError, match="nobody"):
        run("create_use_case", "team2", "--name", "Team 2", "--team-lead", "nobody")
    assert not UseCase.objects.filter(slug="team2").exists()


def _service_row_values(service_id):
    """Every column of the service row as text, read with raw SQL (no model code in between)."""
    table = Service._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} WHERE id = %s", [service_id])
        row = cursor.fetchone()
    return [str(v) for v in row]


def test_create_service_prints_key_last_and_stores_only_its_hash(client):
    run("create_use_case", "hotline", "--name", "Hotline")
    out = run("create_service", "rag-hotline", "--use-case", "hotline")
    lines = out.rstrip("\n").split("\n")
    key = lines[-1].strip()
    assert len(lines) >= 2  # an explanation before the key
    assert keys.key_prefix(key) is not None, key
    service = Service.objects.get(name="rag-hotline")
    assert service.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert service.key_prefix == keys.key_prefix(key)
    assert list(service.use_cases.values_list("slug", flat=True)) == ["hotline"]
    row = _service_row_values(service.pk)
    assert not any(key in value for value in row), row
    secret = key.split("_", 2)[2]
    assert not any(secret in value for value in row), row

    # the printed key works against the API
    api = ApiClient(client, key)
    body = {"external_id": "cmd-1", "use_case": "hotline", "question": "Frage?",
            "answer": "Antwort.", "model": "m"}
    assert api.post("/api/v1/answers", body).status_code == 201
    assert ApiClient(client, key + "x").post("/api/v1/answers", body).status_code == 401


def test_create_service_with_several_use_cases():
    run("create_use_case", "a", "--name", "A")
    run("create_use_case", "b", "--name", "B")
    run("create_service", "multi", "--use-case", "a", "--use-case", "b", "--use-case", "a")
    slugs = set(Service.objects.get(name="multi").use_cases.values_list("slug", flat=True))
    assert slugs == {"a", "b"}


def test_create_service_keys_differ():
    run("create_use_case", "a", "--name", "A")
    first = run("create_service", "one", "--use-case", "a").split()[-1]
    second = run("create_service", "two", "--use-case", "a").split()[-1]
    assert first != second


def test_create_service_unknown_use_case():
    run("create_use_case", "known", "--name", "Known")
    with pytest.raises(CommandError, match="missing"):
        run("create_service", "svc", "--use-case", "known", "--use-case", "missing")
    assert not Service.objects.exists()


def test_create_service_duplicate_name():
    run("create_use_case", "a", "--name", "A")
    run("create_service", "svc", "--use-case", "a")
    with pytest.raises(CommandError, match="already exists"):
        run("create_service", "svc", "--use-case", "a")
    assert Service.objects.count() == 1


def test_create_service_requires_a_use_case():
    with pytest.raises(CommandError):
        run("create_service", "svc")
    assert not Service.objects.exists()


def _hotline_service_and_key():
    run("create_use_case", "hotline", "--name", "Hotline")
    out = run("create_service", "rag-hotline", "--use-case", "hotline")
    return Service.objects.get(name="rag-hotline"), out.rstrip("\n").split("\n")[-1].strip()


def _post_with(client, key, n):
    body = {"external_id": f"rot-{n}", "use_case": "hotline", "question": "Frage?",
            "answer": "Antwort.", "model": "m"}
    return ApiClient(client, key).post("/api/v1/answers", body).status_code


def test_rotate_service_key_prints_a_new_key_and_the_old_one_works_through_the_grace(client):
    service, old = _hotline_service_and_key()

    out = run("rotate_service_key", "rag-hotline", "--grace-hours", "2")

    lines = out.rstrip("\n").split("\n")
    new = lines[-1].strip()
    assert keys.key_prefix(new) is not None and new != old
    assert "old key works until" in lines[0]
    service.refresh_from_db()
    assert service.key_hash == hashlib.sha256(new.encode()).hexdigest()
    assert service.previous_key_hash == hashlib.sha256(old.encode()).hexdigest()
    row = _service_row_values(service.pk)
    for secret in (new.split("_", 2)[2], old.split("_", 2)[2]):
        assert not any(secret in value for value in row), row
    # Both keys work during the grace period, for the same service.
    assert _post_with(client, new, 1) == 201
    assert _post_with(client, old, 2) == 201
    assert _post_with(client, old + "x", 3) == 401
    assert set(Answer.objects.values_list("service__name", flat=True)) == {"rag-hotline"}

    # After it, the old key is refused and the new one still works.
    Service.objects.filter(pk=service.pk).update(
        previous_key_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert _post_with(client, old, 4) == 401
    assert _post_with(client, new, 5) == 201


def test_rotating_twice_revokes_the_first_key_and_grace_zero_revokes_at_once(client):
    service, first = _hotline_service_and_key()
    second = run("rotate_service_key", "rag-hotline").rstrip("\n").split("\n")[-1]
    third = run("rotate_service_key", "rag-hotline").rstrip("\n").split("\n")[-1]
    # Only the key just replaced has a grace period.
    assert _post_with(client, first, 1) == 401
    assert _post_with(client, second, 2) == 201
    assert _post_with(client, third, 3) == 201

    out = run("rotate_service_key", "rag-hotline", "--grace-hours", "0")
    fourth = out.rstrip("\n").split("\n")[-1]
    assert "refused from now on" in out
    assert _post_with(client, third, 4) == 401
    assert _post_with(client, fourth, 5) == 201


def test_rotate_service_key_refuses_an_unknown_or_revoked_service_and_a_bad_grace():
    service, _ = _hotline_service_and_key()
    with pytest.raises(CommandError, match="unknown service 'nope'.*rag-hotline"):
        run("rotate_service_key", "nope")
    with pytest.raises(CommandError, match="between 0 and 8760"):
        run("rotate_service_key", "rag-hotline", "--grace-hours", "-1")
    Service.objects.filter(pk=service.pk).update(active=False)
    with pytest.raises(CommandError, match="revoked"):
        run("rotate_service_key", "rag-hotline")
    assert Service.objects.get(pk=service.pk).key_hash == service.key_hash
