"""Dashboard benchmark: how fast the team-lead pages answer on a million answers.

It fills a PostgreSQL database of its own (default ``treue_bench_dashboard``) with generated
answers - 10 use cases over the last 52 ISO weeks up to now, with the strata, verdicts and
retrieval figures a production database would have - and times, server side, the pages a team
lead opens: the overview, a use-case page, the answer explorer's first page filtered to that use
case and the estimates API (and, for operations, ``/metrics``). The pages are called in-process
through Django's test client, logged in as a team lead of all 10 use cases, so the times are
the application's and the database's, without a web server or network in between.

The data:

* per use case a different volume (the largest about ten times the smallest), flagged share
  (3-8 %, ~5 % overall) and base faithfulness; one use case slowly gets worse over the year;
* tier 1 and 2 as ingest and the judge leave them: ``flagged`` iff the lowest content-word
  probability is below the threshold 0.5 (10 % of answers without logprobs: never flagged);
  ``in_random_sample`` from the product's own hash draw at rate 0.03, independent of the flag;
  ``sampled``, ``sample_reason``, ``inclusion_probability`` and ``status`` consistent with them;
* each sampled answer has a judge run; ~1 % of runs failed, answers of the last hours are still
  queued or being judged; a succeeded run has 1-6 claims (3 % abstentions without claims) whose
  labels are mostly GEDECKT, less often for flagged answers, poor retrieval (low best-chunk
  similarity), many chunks and multi-part questions, so that the causes panel has something to
  find; the answer's score is the mean of its claims' points, as the judge computes it;
* the judge's prompt version changes once in the year (a marker on the trend chart); runs carry
  calls, tokens and a cost from a stored price.

Left out, because no timed page reads them: retrieved chunk rows (``best_chunk_score`` and
``chunk_count`` are on the answer), token data and the judge's raw call log.

Loading: ``migrate`` first (the schema and indexes under test are the migrations'), then the
answers, runs and claims by PostgreSQL ``COPY`` (psycopg's ``cursor.copy``) with the secondary
indexes and foreign keys dropped, which are then rebuilt from their own definitions and the
foreign keys validated; finally ``VACUUM ANALYZE``, the state autovacuum keeps a live database
in (index-only scans need the visibility map).

    .venv/bin/python bench/dashboard.py                    # 1,000,000 answers
    .venv/bin/python bench/dashboard.py --answers 50000    # a quick run
    .venv/bin/python bench/dashboard.py --keep             # keep the database, reuse it next time
    .venv/bin/python bench/dashboard.py --source rollups   # only from the rollups
    .venv/bin/python bench/dashboard.py --keep --source rollups --no-rebuild   # time again

The pages are timed twice by default: reading the raw rows, then (after ``rebuild_rollups``,
whose time is printed per 100,000 answers) reading the weekly rollups, side by side.

Needs PostgreSQL: the server of ``DATABASE_URL`` (any database name in it is ignored) or
``postgres://postgres@127.0.0.1:5432/``. Without ``--keep`` the bench database is dropped at
the end (and an existing one replaced at the start). Exit status 0 when every page answered
200 (targets met or not; ``--strict`` exits 2 on a missed target), 1 on errors.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/statistics.py would
# shadow the standard library's statistics module (Django and this file import it).
_sys.path[0] = str(_Path(__file__).resolve().parents[1])

import argparse
import hashlib
import json
import math
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from random import Random
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DB = "treue_bench_dashboard"
DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432/"
TARGET_P50_MS = 300.0
USE_CASES = 10
WEEKS = 52
SAMPLE_RATE = 0.03
LOGPROB_THRESHOLD = 0.5
NO_LOGPROBS_SHARE = 0.10
FAILED_RUN_SHARE = 0.01
ABSTENTION_SHARE = 0.03
MULTI_PART_SHARE = 0.15
# Answers of the last hours are still waiting for the judge (queued) or being judged.
WAITING_HOURS = 2
GENERATOR = "gpt-4o-mini-2024-07-18"
JUDGE = "gpt-4.1-mini-judge"
OLD_PROMPT = "2026-01"
PROMPT_PRICE = Decimal("0.0004")  # per 1,000 prompt tokens
COMPLETION_PRICE = Decimal("0.0016")  # per 1,000 completion tokens
TABLES = ("monitoring_answer", "monitoring_judgerun", "monitoring_claim")
# Segments (issue 40): 20 generator models (each use case mostly on one, which half of them
# switch in week 40; the rest spread over all 20), 20 prompt versions released one after the
# other through the year (a tenth of the answers still on the one before), 30 sources, and 3
# declared metadata keys of 50 values each.
MODELS = [GENERATOR, *(f"gen-model-{i:02d}" for i in range(1, 20))]
PROMPT_VERSIONS = [f"prompt-{i:02d}" for i in range(1, 21)]
SOURCES = [f"handbuch-{i:02d}.pdf" for i in range(30)]
SEGMENT_KEYS = ("abteilung", "kanal", "region")
SEGMENT_VALUES = 50
SWITCH_WEEK = 40

# (slug, name, share of the answers, flagged share, base probability of GEDECKT per claim)
USE_CASE_SPECS = [
    ("personal-faq", "Personal-FAQ", 0.22, 0.04, 0.96),
    ("reisekosten", "Reisekosten", 0.16, 0.05, 0.95),
    ("gefahrstoffe", "Gefahrstoffe", 0.13, 0.08, 0.90),
    ("it-support", "IT-Support", 0.11, 0.05, 0.94),  # drifts: worse every week
    ("vertraege", "Verträge", 0.09, 0.06, 0.92),
    ("einkauf", "Einkauf", 0.08, 0.03, 0.97),
    ("kundenservice", "Kundenservice", 0.08, 0.05, 0.93),
    ("recht", "Recht", 0.06, 0.07, 0.89),
    ("vertrieb-en", "Sales (EN)", 0.04, 0.04, 0.95),
    ("onboarding", "Onboarding", 0.03, 0.03, 0.97),
]
DRIFTING = "it-support"
QUESTIONS = [
    "Wie viele Tage Urlaub stehen mir nach der Probezeit zu?",
    "Welche Frist gilt für die Erstattung von Reisekosten?",
    "Bis wann muss die Krankmeldung bei der Personalabteilung sein?",
    "Welche Behältergröße ist für die Lagerung zulässig?",
    "Wer genehmigt Überstunden in meiner Abteilung?",
]
MULTI_PART_QUESTIONS = [
    "Wie viele Tage Urlaub habe ich und wie beantrage ich ihn?",
    "Welche Frist gilt für Reisekosten und wer gibt sie frei?",
    "Wo lagere ich Gefahrstoffe und wie oft wird geprüft?",
]
ANSWER_TEXTS = [
    "Nach der Probezeit stehen Ihnen 30 Tage Urlaub im Kalenderjahr zu.",
    "Reisekosten sind innerhalb von 3 Monaten nach der Reise einzureichen.",
    "Die Krankmeldung muss spätestens am dritten Tag vorliegen.",
    "Zulässig sind Behälter bis 1.000 Liter gemäß Abschnitt 4.",
    "Überstunden genehmigt die direkte Vorgesetzte vorab in Workday.",
]
UNCERTAIN = ['[{"token": "Frist", "probability": 0.31, "position": 10, "end": 15}]',
             '[{"token": "3", "probability": 0.22, "position": 42, "end": 43}]',
             '[{"token": "Workday", "probability": 0.41, "position": 50, "end": 57}]']


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------- database handling


def server_url() -> str:
    """The server of DATABASE_URL (its database name dropped), else the local default."""
    url = os.environ.get("DATABASE_URL") or ""
    if not url.startswith(("postgres://", "postgresql://")):
        return DEFAULT_SERVER
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/", parts.query, ""))


def database_url(server: str, name: str) -> str:
    parts = urlsplit(server)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def admin_connect(server: str) -> psycopg.Connection:
    return psycopg.connect(database_url(server, "postgres"), autocommit=True)


def database_exists(server: str, name: str) -> bool:
    with admin_connect(server) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() \
            is not None


def drop_database(server: str, name: str) -> None:
    with admin_connect(server) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def create_database(server: str, name: str) -> None:
    with admin_connect(server) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def setup_django(url: str, var_dir: str) -> None:
    """Django on the bench database, as in production: DEBUG off (no query log)."""
    os.environ.update({
        "DATABASE_URL": url,
        "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(32),
        "SESSION_COOKIE_SECURE": "False",
        "CSRF_COOKIE_SECURE": "False",
        "SECURE_SSL_REDIRECT": "False",
        "TREUE_VAR_DIR": var_dir,
        "DJANGO_SETTINGS_MODULE": "treue_site.settings",
    })
    import django

    django.setup()


# --------------------------------------------------------------------------- the generated data


@dataclass
class Case:
    pk: int
    slug: str
    service_pk: int
    share: float
    flag_share: float
    quality: float
    external_prefix: str


@dataclass
class Fill:
    answers: int = 0
    flagged: int = 0
    random_sample: int = 0
    runs: int = 0
    judged: int = 0
    failed: int = 0
    waiting: int = 0
    claims: int = 0
    seconds_generate_copy: float = 0.0
    seconds_indexes: float = 0.0
    seconds_vacuum: float = 0.0


def _label(rng: Random, g: float) -> tuple[str, float]:
    r = rng.random()
    if r < g:
        return "GEDECKT", 1.0
    if r < g + (1 - g) * 0.35:
        return "TEILWEISE", 0.5
    return "UNGEDECKT", 0.0


def _chunks(rng: Random) -> tuple[int, float | None]:
    """(chunk count, best similarity): mostly 3-8 chunks, some very many, a few none."""
    r = rng.random()
    if r < 0.02:
        return 0, None
    count = rng.randint(11, 30) if r < 0.12 else rng.randint(3, 8)
    # Mostly good retrieval, a tail of poor matches where retrieval found nothing fitting.
    best = rng.betavariate(6, 2.2) if rng.random() < 0.85 else rng.uniform(0.2, 0.55)
    return count, round(best, 4)


def generate(
    cases: Sequence[Case], weeks: Sequence[Any], now: datetime, total: int, seed: int,
    extra_answer: dict[str, Any],
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """("answer" | "run" | "claim", row) for every row, each answer before its run and claims.

    Rows are tuples in the column order of ANSWER_COLUMNS (then the extra columns'
    defaults) / RUN_COLUMNS / CLAIM_COLUMNS.
    """
    from ingest.domain import sampling
    from judging.domain.judge_prompt import PROMPT_VERSION

    rng = Random(seed)
    start = weeks[0].start
    span = (now - start).total_seconds()
    change_at = weeks[len(weeks) * 3 // 5].start  # the prompt version changes here
    waiting_since = now - timedelta(hours=WAITING_HOURS)
    answer_id = run_id = claim_id = 0
    counts = [round(total * c.share) for c in cases]
    counts[0] += total - sum(counts)
    extra = tuple(extra_answer.values())

    for case, n in zip(cases, counts, strict=True):
        # Sorted times, so that ids grow with time as in production.
        offsets = sorted(rng.random() * span for _ in range(n))
        service_key = str(case.service_pk)
        for i, offset in enumerate(offsets):
            answer_id += 1
            created = start + timedelta(seconds=offset)
            received = created + timedelta(seconds=rng.uniform(0.05, 2.0))
            external_id = f"{case.external_prefix}-{i}"
            has_logprobs = rng.random() >= NO_LOGPROBS_SHARE
            flagged = has_logprobs and rng.random() < case.flag_share / (1 - NO_LOGPROBS_SHARE)
            if has_logprobs:
                min_p = rng.uniform(0.02, LOGPROB_THRESHOLD - 1e-4) if flagged else \
                    LOGPROB_THRESHOLD + (1 - LOGPROB_THRESHOLD) * rng.betavariate(1.2, 1)
                min_p = round(min(min_p, 0.9999), 4)
            else:
                min_p = None
            multi_part = rng.random() < MULTI_PART_SHARE
            chunk_count, best = _chunks(rng)
            decision = sampling.decide(
                service_key=service_key, external_id=external_id, flagged=flagged,
                rate=SAMPLE_RATE,
            )
            status, run_ref, score, abstention = "not_sampled", None, None, False
            run_row = None
            claim_rows: list[tuple[Any, ...]] = []
            if decision.sampled:
                run_id += 1
                prompt = OLD_PROMPT if created < change_at else PROMPT_VERSION
                if received >= waiting_since:
                    status = "queued" if rng.random() < 0.7 else "judging"
                    run_status = "pending" if status == "queued" else "running"
                    run_row = _run(run_id, answer_id, case.pk, created, run_status, prompt,
                                   received, 0, None, False, "", rng)
                elif rng.random() < FAILED_RUN_SHARE:
                    status = "failed"
                    run_row = _run(run_id, answer_id, case.pk, created, "failed", prompt,
                                   received, 1, None, False, "judge error 500", rng)
                else:
                    status, run_ref = "judged", run_id
                    g = case.quality
                    if flagged:
                        g -= 0.25
                    if best is not None and best < 0.5:
                        g -= 0.22
                    if chunk_count > 10:
                        g -= 0.08
                    if multi_part:
                        g -= 0.10
                    if case.slug == DRIFTING:
                        g -= 0.12 * (created - start).total_seconds() / span
                    g = min(0.995, max(0.05, g))
                    n_claims = 0 if rng.random() < ABSTENTION_SHARE else rng.randint(1, 6)
                    points = 0.0
                    for position in range(1, n_claims + 1):
                        claim_id += 1
                        label, p = _label(rng, g)
                        points += p
                        claim_rows.append((
                            claim_id, run_id, position,
                            f"Aussage {position} der Antwort {answer_id}.", label, label,
                            JUDGE, prompt, 1, False, rng.randint(250, 900), 420, 2,
                        ))
                    abstention = n_claims == 0
                    score = 1.0 if abstention else points / n_claims
                    run_row = _run(run_id, answer_id, case.pk, created, "succeeded", prompt,
                                   received, 1 + n_claims, score, abstention, "", rng)
            position = offset / span
            main = MODELS[(case.pk * 7 + (position * WEEKS >= SWITCH_WEEK and case.pk % 2))
                          % len(MODELS)]
            model = main if rng.random() < 0.8 else rng.choice(MODELS)
            release = min(len(PROMPT_VERSIONS) - 1, int(position * len(PROMPT_VERSIONS)))
            if release and rng.random() < 0.1:
                release -= 1
            metadata = json.dumps({k: f"{k}-{rng.randrange(SEGMENT_VALUES):02d}"
                                   for k in SEGMENT_KEYS})
            question = rng.choice(MULTI_PART_QUESTIONS if multi_part else QUESTIONS)
            yield "answer", (
                answer_id, case.pk, case.service_pk, external_id,
                hashlib.sha256(external_id.encode()).hexdigest(), question,
                ANSWER_TEXTS[answer_id % len(ANSWER_TEXTS)], model, None, metadata, created,
                received, "ok" if has_logprobs else "none", None, LOGPROB_THRESHOLD, flagged,
                rng.choice(UNCERTAIN) if flagged else "[]", decision.in_random_sample,
                decision.sampled, decision.reason, decision.inclusion_probability, status,
                run_ref, score, abstention, chunk_count, best, min_p, multi_part,
                PROMPT_VERSIONS[release], rng.choice(SOURCES), *extra,
            )
            if run_row is not None:
                yield "run", run_row
            for row in claim_rows:
                yield "claim", row


ANSWER_COLUMNS = (
    "id", "use_case_id", "service_id", "external_id", "content_hash", "question", "text",
    "model", "messages", "metadata", "created_at", "received_at", "logprobs_status",
    "token_data", "logprob_threshold", "flagged", "uncertain_tokens", "in_random_sample",
    "sampled", "sample_reason", "inclusion_probability", "status", "current_run_id", "score",
    "abstention", "chunk_count", "best_chunk_score", "min_content_probability", "multi_part",
    "prompt_version", "source",
)
RUN_COLUMNS = (
    "id", "answer_id", "use_case_id", "answer_created_at", "status", "trigger", "judge_model",
    "prompt_version", "requested_by_id", "created_at", "started_at", "finished_at", "lease_token",
    "lease_expires_at", "attempts", "not_before", "calls", "prompt_tokens", "completion_tokens",
    "cost", "decomposition_raw", "call_log", "score", "abstention", "unparseable", "error",
    "retryable",
)
CLAIM_COLUMNS = (
    "id", "run_id", "position", "text", "label", "raw_reply", "judge_model", "prompt_version",
    "attempts", "cached", "latency_ms", "prompt_tokens", "completion_tokens",
)


def _run(
    run_id: int, answer_id: int, use_case_id: int, answer_created_at: datetime, status: str,
    prompt: str, received: datetime, calls: int, score: float | None, abstention: bool,
    error: str, rng: Random,
) -> tuple[Any, ...]:
    started = received + timedelta(seconds=rng.uniform(0.5, 30)) if status != "pending" else None
    finished = started + timedelta(seconds=rng.uniform(2, 12)) \
        if started and status in ("succeeded", "failed") else None
    prompt_tokens = 600 + 380 * max(0, calls - 1) if calls else 0
    completion_tokens = 60 + 2 * max(0, calls - 1) if calls else 0
    cost = (PROMPT_PRICE * prompt_tokens + COMPLETION_PRICE * completion_tokens) / 1000
    return (
        run_id, answer_id, use_case_id, answer_created_at, status, "sample", JUDGE, prompt, None,
        received, started, finished, None, None, 1 if started else 0, None, calls, prompt_tokens,
        completion_tokens, cost.quantize(Decimal("0.000001")) if calls else None, "", "[]",
        score, abstention, 0, error, False,
    )


def _extra_columns(model: Any, columns: Sequence[str]) -> dict[str, Any]:
    """Columns a newer model has that this bench does not generate: their defaults."""
    from django.db import connection
    from django.db.models import JSONField

    out = {}
    for field in model._meta.concrete_fields:
        if field.column not in columns:
            value = field.get_default()
            # COPY takes JSON as its text, as the generated rows write call_log.
            out[field.column] = json.dumps(value) if isinstance(field, JSONField) \
                else field.get_db_prep_save(value, connection)
    return out


def _secondary_objects(cur: psycopg.Cursor) -> tuple[list[str], list[str], list[str]]:
    """(drop statements, index definitions, constraint definitions) of the loaded tables."""
    cur.execute(
        """
        SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid), c.contype
        FROM pg_constraint c
        WHERE c.conrelid = ANY(%s::regclass[]) AND c.contype IN ('f', 'u')
        ORDER BY c.contype DESC, c.conname
        """,
        [list(TABLES)],
    )
    constraints = cur.fetchall()
    cur.execute(
        """
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
        FROM pg_index i
        WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid
                          AND c.contype IN ('p', 'u'))
        ORDER BY 1
        """,
        [list(TABLES)],
    )
    indexes = cur.fetchall()
    drops = [f'ALTER TABLE {table} DROP CONSTRAINT "{name}"' for table, name, _, _ in constraints]
    drops += [f"DROP INDEX {name}" for name, _ in indexes]
    # Unique constraints first (their indexes), foreign keys after the indexes are there.
    adds = [f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'
            for table, name, definition, kind in constraints if kind == "u"]
    fks = [f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'
           for table, name, definition, kind in constraints if kind == "f"]
    # A partitioned table's index reads "ON ONLY parent": made so, it would cover no partition.
    return drops, [d.replace(" ON ONLY ", " ON ") for _, d in indexes] + adds, fks


def fill(url: str, answers: int, seed: int, say: Callable[[str], None]) -> Fill:
    """Use cases, services, a price and the lead through the product; the rest by COPY."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from dashboard.selectors.weeks import iso_weeks
    from monitoring.models import Answer, Claim, JudgePrice, JudgeRun, UseCase
    from monitoring.services.use_cases import service_create, use_case_create

    now = timezone.now()
    weeks = iso_weeks(weeks=WEEKS, until=now)
    lead = User.objects.create_user("bench-lead", password=secrets.token_urlsafe(16))
    User.objects.create_user("bench-ops", password=secrets.token_urlsafe(16), is_staff=True)
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=PROMPT_PRICE,
                              completion_per_1k=COMPLETION_PRICE, currency="EUR")
    cases = []
    for slug, name, share, flag_share, quality in USE_CASE_SPECS[:USE_CASES]:
        use_case = use_case_create(slug=slug, name=name, sample_rate=SAMPLE_RATE)
        # Declared before any answer: the rebuild counts them (no task to wait for).
        UseCase.objects.filter(pk=use_case.pk).update(segment_keys=list(SEGMENT_KEYS))
        use_case.team_leads.add(lead)
        service, _ = service_create(name=f"{slug}-bot", use_cases=[use_case])
        cases.append(Case(use_case.pk, slug, service.pk, share, flag_share, quality, slug))
    extra = _extra_columns(Answer, ANSWER_COLUMNS)
    if extra:
        say(f"columns not generated, filled with their defaults: {', '.join(extra)}")
    columns = (*ANSWER_COLUMNS, *extra)

    out = Fill()
    started = time.perf_counter()
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute("SET maintenance_work_mem = '256MB'")
        drops, indexes, fks = _secondary_objects(cur)
        for statement in drops:
            cur.execute(statement)
        # Three COPY streams cannot be open on one connection at once: the answers are written
        # first, their runs and claims buffered (about a tenth of the rows) and written after.
        runs: list[tuple[Any, ...]] = []
        claims: list[tuple[Any, ...]] = []
        copy_answers = sql.SQL("COPY monitoring_answer ({}) FROM STDIN").format(
            sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        with cur.copy(copy_answers) as copy:
            for kind, row in generate(cases, weeks, now, answers, seed, extra):
                if kind == "answer":
                    copy.write_row(row)
                    out.answers += 1
                    out.flagged += row[15]
                    out.random_sample += row[17]
                    if out.answers % 100_000 == 0:
                        say(f"  {out.answers:,} answers ({time.perf_counter() - started:.0f} s)")
                elif kind == "run":
                    runs.append(row)
                else:
                    claims.append(row)
        for table, model, cols, rows in (
            ("monitoring_judgerun", JudgeRun, RUN_COLUMNS, runs),
            ("monitoring_claim", Claim, CLAIM_COLUMNS, claims),
        ):
            more = _extra_columns(model, cols)
            if more:
                say(f"{table}: columns not generated, filled with their defaults: "
                    f"{', '.join(more)}")
            statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
                sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, (*cols, *more)))
            )
            tail = tuple(more.values())
            with cur.copy(statement) as copy:
                for row in rows:
                    copy.write_row((*row, *tail))
        out.runs, out.claims = len(runs), len(claims)
        out.judged = sum(1 for r in runs if r[2] == "succeeded")
        out.failed = sum(1 for r in runs if r[2] == "failed")
        out.waiting = sum(1 for r in runs if r[2] in ("pending", "running"))
        for table, count in (("monitoring_answer", out.answers), ("monitoring_judgerun",
                                                                  out.runs),
                             ("monitoring_claim", out.claims)):
            cur.execute(
                sql.SQL("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, true)"),
                [table, max(count, 1)],
            )
        out.seconds_generate_copy = time.perf_counter() - started
        say(f"  copied in {out.seconds_generate_copy:.0f} s; rebuilding "
            f"{len(indexes)} indexes and {len(fks)} foreign keys")
        started = time.perf_counter()
        for statement in (*indexes, *fks):
            cur.execute(statement)
        cur.execute(
            "CREATE TABLE bench_fill (answers integer, seed integer, filled_at timestamptz)"
        )
        cur.execute("INSERT INTO bench_fill VALUES (%s, %s, now())", [answers, seed])
        conn.commit()
        out.seconds_indexes = time.perf_counter() - started
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
    out.seconds_vacuum = time.perf_counter() - started
    return out


def filled_with(url: str) -> tuple[int, int, datetime] | None:
    """(answers, seed, when) of an earlier fill of this database, or None."""
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT answers, seed, filled_at FROM bench_fill").fetchone()
    except psycopg.Error:
        return None
    return tuple(row) if row else None  # type: ignore[return-value]


# --------------------------------------------------------------------------- timing the pages


@dataclass
class Timing:
    name: str
    url: str
    wall_ms: list[float]
    cpu_ms: list[float]
    statuses: set[int]

    def p(self, q: float) -> float:
        """Nearest-rank percentile."""
        ordered = sorted(self.wall_ms)
        return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def time_page(client: Any, name: str, url: str, warmup: int, repeat: int) -> Timing:
    for _ in range(warmup):
        response = client.get(url)
        if response.status_code != 200:
            raise BenchError(f"{name}: {url} answered {response.status_code}")
    timing = Timing(name, url, [], [], set())
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        response = client.get(url)
        timing.wall_ms.append((time.perf_counter() - wall) * 1000)
        timing.cpu_ms.append((time.process_time() - cpu) * 1000)
        timing.statuses.add(response.status_code)
        if response.status_code == 200 and hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
    return timing


def explain_slowest(client: Any, url: str, top: int, say: Callable[[str], None]) -> None:
    """The slowest queries of one request, each with EXPLAIN (ANALYZE, BUFFERS)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    queries = sorted(captured.captured_queries, key=lambda q: -float(q["time"]))
    total = sum(float(q["time"]) for q in queries)
    say(f"    {len(queries)} queries, {total * 1000:.0f} ms in the database")
    for query in queries[:top]:
        say(f"    --- {float(query['time']) * 1000:.0f} ms: {query['sql'][:300]}")
        try:
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + query["sql"])
                for (line,) in cursor.fetchall():
                    say(f"      {line}")
        except Exception as e:  # the SQL as logged is not always executable again
            say(f"      (no plan: {e})")


def run_pages(args: argparse.Namespace, say: Callable[[str], None]) -> list[Timing]:
    from django.contrib.auth.models import User
    from django.db.models import Count
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from monitoring.models import UseCase

    lead = User.objects.get(username="bench-lead")
    ops = User.objects.get(username="bench-ops")
    # The largest use case: the slowest use-case page and explorer filter.
    biggest = (
        UseCase.objects.annotate(n=Count("answers")).order_by("-n").values_list("slug", flat=True)
        .first()
    )
    client = Client()
    client.force_login(lead)
    staff = Client()
    staff.force_login(ops)
    pages = [
        ("overview", client, reverse("monitoring:overview")),
        ("use case page", client, reverse("monitoring:use_case", args=[biggest])),
        ("explorer, first page", client,
         reverse("monitoring:answer_list") + f"?use_case={biggest}"),
        ("estimates API, 12 weeks", client, f"/api/v1/use-cases/{biggest}/estimates"),
    ]
    if args.extra:
        first = timezone.localdate() - timedelta(weeks=WEEKS - 1)
        year, week, _ = first.isocalendar()
        pages += [
            ("estimates API, 52 weeks", client,
             f"/api/v1/use-cases/{biggest}/estimates?from={year}-W{week:02d}"),
            ("metrics", staff, "/metrics"),
            ("use case page, by a key", client,
             reverse("monitoring:use_case", args=[biggest]) + "?dimension=metadata.abteilung"),
            ("segments API, by model", client,
             f"/api/v1/use-cases/{biggest}/segments?dimension=model"),
            ("judge page", client, reverse("monitoring:use_case_judge", args=[biggest])),
        ]
    timings = []
    for name, who, url in pages:
        timing = time_page(who, name, url, args.warmup, args.repeat)
        timings.append(timing)
        say(f"  {name:<26} p50 {timing.p(50):7.0f} ms   p95 {timing.p(95):7.0f} ms")
        if args.explain or (timing.p(50) > TARGET_P50_MS and not args.no_explain):
            explain_slowest(who, url, args.explain_top, say)
    return timings


PER_USE_CASE = "SELECT count(*) n FROM monitoring_answer GROUP BY use_case_id"


def row_counts(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        out = []
        for label, query in (
            ("answers", "SELECT count(*) FROM monitoring_answer"),
            ("  flagged", "SELECT count(*) FROM monitoring_answer WHERE flagged"),
            ("  in the random sample",
             "SELECT count(*) FROM monitoring_answer WHERE in_random_sample"),
            ("  judged", "SELECT count(*) FROM monitoring_answer WHERE status = 'judged'"),
            ("  failed", "SELECT count(*) FROM monitoring_answer WHERE status = 'failed'"),
            ("  queued or judging",
             "SELECT count(*) FROM monitoring_answer WHERE status IN ('queued', 'judging')"),
            ("judge runs", "SELECT count(*) FROM monitoring_judgerun"),
            ("claims", "SELECT count(*) FROM monitoring_claim"),
            ("use cases", "SELECT count(*) FROM monitoring_usecase"),
            ("largest use case", f"SELECT max(n) FROM ({PER_USE_CASE}) t"),
            ("smallest use case", f"SELECT min(n) FROM ({PER_USE_CASE}) t"),
        ):
            out.append((label, conn.execute(query).fetchone()[0] or 0))
        return out


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=1_000_000,
                        help="answers to generate (default 1,000,000)")
    parser.add_argument("--db", default=DEFAULT_DB, help=f"database name (default {DEFAULT_DB})")
    parser.add_argument("--keep", action="store_true",
                        help="reuse the database if it holds a fill of --answers answers with "
                             "--seed, and keep it afterwards")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=20, help="timed requests per page")
    parser.add_argument("--warmup", type=int, default=3, help="untimed requests first")
    parser.add_argument("--extra", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the estimates API over 52 weeks and /metrics")
    parser.add_argument("--explain", action="store_true",
                        help="show the slowest queries with EXPLAIN ANALYZE for every page "
                             "(by default only for pages over the target)")
    parser.add_argument("--no-explain", action="store_true", help="never show query plans")
    parser.add_argument("--explain-top", type=int, default=2)
    parser.add_argument("--source", choices=("raw", "rollups", "both"), default="both",
                        help="time the pages reading the raw rows, the rollups (after "
                             "rebuild_rollups, as COPY goes around the services) or both, side "
                             "by side (default)")
    parser.add_argument("--strict", action="store_true", help="exit 2 when a target is missed")
    parser.add_argument("--no-rebuild", action="store_true",
                        help="with --keep and --source rollups: time a kept database's whole "
                             "rollups without rebuilding them first")
    args = parser.parse_args(argv)
    if args.answers < 1000:
        parser.error("--answers must be at least 1000")
    if args.repeat < 1 or args.warmup < 0:
        parser.error("--repeat must be at least 1 and --warmup at least 0")
    return args


def run(args: argparse.Namespace) -> int:
    def say(text: str) -> None:
        print(text, flush=True)

    server = server_url()
    url = database_url(server, args.db)
    reuse = False
    if database_exists(server, args.db):
        earlier = filled_with(url)
        if args.keep and earlier is not None and earlier[:2] == (args.answers, args.seed):
            reuse = True
            say(f"reusing {args.db}: {earlier[0]:,} answers filled {earlier[2]:%Y-%m-%d %H:%M}")
        else:
            say(f"replacing {args.db}")
            drop_database(server, args.db)
    if not reuse:
        create_database(server, args.db)
    fill_result: Fill | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="treue-bench-") as var_dir:
            setup_django(url, var_dir)
            from django.core.management import call_command
            from django.db import connections

            started = time.perf_counter()
            call_command("migrate", verbosity=0, interactive=False)
            migrate_seconds = time.perf_counter() - started
            say(f"migrate: {migrate_seconds:.1f} s")
            if not reuse:
                say(f"filling {args.db} with {args.answers:,} answers")
                fill_result = fill(url, args.answers, args.seed, say)
            counts = row_counts(url)
            from monitoring.models import RollupState
            from monitoring.services.rollup_rebuild import rollups_rebuild

            timings_raw: list[Timing] = []
            if args.source in ("raw", "both"):
                RollupState.objects.all().delete()  # the pages read the raw rows
                say("timing from the raw rows (server side, in-process; "
                    f"{args.warmup} warm-up + {args.repeat} timed requests each)")
                timings_raw = run_pages(args, say)
            rebuild_seconds = None
            timings = timings_raw
            if args.source in ("rollups", "both"):
                from monitoring.models.rollups import rollups_ready

                if reuse and args.no_rebuild and rollups_ready():
                    say("the kept rollups are whole: not rebuilt (--no-rebuild)")
                else:
                    started = time.perf_counter()
                    rebuilt = rollups_rebuild()  # COPY went around the services
                    rebuild_seconds = time.perf_counter() - started
                    say(f"rebuild_rollups: {rebuild_seconds:.1f} s "
                        f"({rebuild_seconds / counts[0][1] * 100_000:.2f} s per 100,000 "
                        "answers; "
                        + ", ".join(f"{n:,} {name} rows" for name, n in rebuilt.rows.items())
                        + ")")
                say("timing from the rollups")
                timings = run_pages(args, say)
            connections.close_all()
    finally:
        if not args.keep:
            drop_database(server, args.db)
    report(args, counts, fill_result, timings, migrate_seconds, timings_raw, rebuild_seconds)
    if any(t.statuses != {200} for t in timings):
        return 1
    missed = [t for t in timings[:4] if t.p(50) > TARGET_P50_MS]
    return 2 if missed and args.strict else 0


def report(
    args: argparse.Namespace, counts: list[tuple[str, int]], fill_result: Fill | None,
    timings: list[Timing], migrate_seconds: float, timings_raw: list[Timing],
    rebuild_seconds: float | None,
) -> None:
    print()
    print("rows")
    for label, n in counts:
        print(f"  {label:<24} {n:>12,}")
    if fill_result is not None:
        f = fill_result
        total = f.seconds_generate_copy + f.seconds_indexes + f.seconds_vacuum
        print(f"fill: {total:.0f} s = generate + COPY {f.seconds_generate_copy:.0f} s, "
              f"indexes + foreign keys {f.seconds_indexes:.0f} s, VACUUM ANALYZE "
              f"{f.seconds_vacuum:.0f} s ({f.answers / f.seconds_generate_copy:,.0f} answers/s "
              f"copied); migrate {migrate_seconds:.0f} s")
    else:
        print("fill: reused (--keep)")
    print()
    header = (f"{'page':<26} {'p50 ms':>8} {'p95 ms':>8} {'min':>7} {'max':>7} "
              f"{'app CPU p50':>12}  target p50 <= {TARGET_P50_MS:.0f} ms")
    print(header)
    print("-" * len(header))
    for i, t in enumerate(timings):
        verdict = ("PASS" if t.p(50) <= TARGET_P50_MS else "MISS") if i < 4 else "(info)"
        if t.statuses != {200}:
            verdict = f"ERROR {sorted(t.statuses)}"
        print(f"{t.name:<26} {t.p(50):8.0f} {t.p(95):8.0f} {min(t.wall_ms):7.0f} "
              f"{max(t.wall_ms):7.0f} {statistics.median(t.cpu_ms):12.0f}  {verdict}")
    if timings_raw and timings is not timings_raw:
        print()
        print(f"{'page':<26} {'raw p50':>8} {'raw p95':>8} {'rollup p50':>11} "
              f"{'rollup p95':>11} {'ratio p50':>10}")
        for raw, rolled in zip(timings_raw, timings, strict=True):
            print(f"{raw.name:<26} {raw.p(50):8.0f} {raw.p(95):8.0f} {rolled.p(50):11.0f} "
                  f"{rolled.p(95):11.0f} {rolled.p(50) / raw.p(50):10.2f}")
    if rebuild_seconds is not None:
        answers = counts[0][1]
        print(f"rebuild_rollups: {rebuild_seconds:.1f} s, "
              f"{rebuild_seconds / answers * 100_000:.2f} s per 100,000 answers")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
