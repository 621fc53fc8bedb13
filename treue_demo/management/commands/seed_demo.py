"""python manage.py seed_demo [--scale F] — and, once judged, seed_demo --expert-labels DIR

The first form creates the demo's use cases (`treue_demo.data.USE_CASES`), its service, a demo
login and the answers of `WEEKS` weeks and the current one up to now; the answers sampled at
ingest get their judge runs, which the worker scores in the background.

The second form plays the experts of the weeks before: it waits until the judge has scored
those weeks' answers, writes for each use case a JSONL file of expert labels, as an annotation
tool would export them, and imports it with `import_expert_labels`. The labels are RAGTruth's
own, every span counted (`treue_demo.server.expert_labels`); the demo judge passes over the
subtle ones, so the experts score a little lower and the expert-scale estimate shows the gap.
"""

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.selectors.weeks import Week, iso_weeks
from ingest import services
from ingest.services import IngestOutcome
from monitoring import extensions
from monitoring.domain.prices import LIST_PRICES, ListPrice
from monitoring.models import Answer, JudgeMode, JudgeRun, Service, UseCase
from monitoring.services.prices import list_prices_create
from monitoring.services.use_cases import (
    service_create,
    use_case_create,
    use_case_declare_segment_keys,
)
from treue_demo.answers import DemoAnswer, expert_labels, expert_score, load_answers
from treue_demo.data import DEMO_JUDGE_MODEL, DEMO_SEGMENT_KEY, USE_CASES, WEEKS, week_answers
from treue_demo.judge import JUDGE_VARIANTS

DEMO_USER = "demo"
DEMO_PASSWORD = "treue-demo"
# The imported reviews are recorded under her: an expert whose labels come from elsewhere (no
# login; the demo user reviews this week's batch in the browser).
DEMO_EXPERT = "demo-expertin"
DEMO_USE_CASE = USE_CASES[0].slug
DEMO_SERVICE = "demo-rag"
# Answers per ingest call. The judge runs of a call go to the broker as one message that the
# worker fans out; the embedded (SQLite) broker, busy with the worker's own polling, now and
# then refuses one of those publishes, and the rest of that message's runs then wait for the
# reconciler (10 minutes). Small calls keep that rest small.
BATCH = 100
POLL_SECONDS = 2.0


# The list price the demo judge and its variants are priced at.
DEMO_PRICED_AS = "gpt-4o-mini"


def demo_prices() -> list[ListPrice]:
    like = next(p for p in LIST_PRICES if p.judge_model == DEMO_PRICED_AS)
    return [
        ListPrice(model, like.prompt_per_1k, like.cached_prompt_per_1k, like.completion_per_1k,
                  like.currency)
        for model in (DEMO_JUDGE_MODEL, *JUDGE_VARIANTS)
    ]


class Command(BaseCommand):
    help = (
        "Create the demo use cases, a demo login and demo answers (safe to run again). With "
        "--expert-labels DIR: once the judge has scored the past weeks, write and import the "
        "demo experts' labels for them."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--scale", type=float, default=1.0, metavar="F",
            help="load F times the demo's volume (default 1; tests load a few per cent)",
        )
        parser.add_argument(
            "--expert-labels", metavar="DIR",
            help="write the experts' labels of the past weeks to DIR/<use case>.jsonl and "
                 "import them with import_expert_labels (after seeding, once judged)",
        )
        parser.add_argument(
            "--wait", type=int, default=0, metavar="SECONDS",
            help="with --expert-labels: first wait up to SECONDS for the judge to score the "
                 "past weeks' sampled answers",
        )

    def handle(self, *args: object, **opts: Any) -> None:
        if opts["expert_labels"]:
            self._expert_labels(Path(opts["expert_labels"]), wait=opts["wait"])
            return
        scale = opts["scale"]
        if not 0 < scale <= 10:
            raise CommandError("--scale: a number above 0 and at most 10")
        self._seed(scale)

    def _seed(self, scale: float) -> None:
        started = time.monotonic()
        with transaction.atomic():
            users = get_user_model().objects
            user = users.filter(username=DEMO_USER).first()
            if user is None:
                user = users.create_superuser(DEMO_USER, "", DEMO_PASSWORD)
            if not users.filter(username=DEMO_EXPERT).exists():
                users.create_user(DEMO_EXPERT)  # no password: she does not log in
            use_cases = []
            for case in USE_CASES:
                use_case = UseCase.objects.filter(slug=case.slug).first() or (
                    use_case_create(
                        slug=case.slug, name=case.name, language="en",
                        sample_rate=case.sample_rate, judge_mode=JudgeMode.BATCHED,
                    )
                )
                if not use_case.segment_keys:
                    # The demo's answers say which channel they came through: a declared key.
                    use_case_declare_segment_keys(use_case=use_case, keys=[DEMO_SEGMENT_KEY])
                use_case.team_leads.add(user)
                use_case.experts.add(user)
                use_cases.append(use_case)
            # The demo judge costs nothing, yet its cost figures should read as a real judge's:
            # priced as DEMO_PRICED_AS (an editable price, set only where none is).
            list_prices_create(prices=demo_prices())
            service = Service.objects.filter(name=DEMO_SERVICE).first()
            key = None
            if service is None:
                service, key = service_create(name=DEMO_SERVICE, use_cases=use_cases)
            else:  # a demo database from before the demo had several use cases
                service.use_cases.add(*use_cases)

        weeks = iso_weeks(weeks=WEEKS + 1)
        now = timezone.now()
        created = dict.fromkeys((c.slug for c in USE_CASES), 0)
        total = dict(created)
        # Newest week first: the judge's queue then scores the weeks the overview opens on, and
        # last week's answers for this week's review batch, before the older ones.
        for number in range(WEEKS + 1, 0, -1):
            week = weeks[number - 1]
            for case in USE_CASES:
                bodies = week_answers(case, number, start=week.start, end=week.end, until=now,
                                      scale=scale)
                total[case.slug] += len(bodies)
                for start in range(0, len(bodies), BATCH):
                    results = services.answer_ingest_batch(
                        service=service, items=bodies[start:start + BATCH]
                    )
                    created[case.slug] += sum(r.outcome == IngestOutcome.CREATED for r in results)
        for use_case in use_cases:
            # Checked now, not at the first hourly check (the worker takes it once it runs): a
            # restart finds its alarms at once, and the experts' import checks again.
            extensions.alarms_check_soon(use_case_id=use_case.pk)
        for case, use_case in zip(USE_CASES, use_cases, strict=True):
            self.stdout.write(
                f"Demo: {created[case.slug]} neue Antworten ({total[case.slug]} insgesamt, "
                f"{WEEKS} Wochen und die laufende) im Anwendungsfall {case.slug}, Stichprobe "
                f"{use_case.sample_rate:.0%}: {case.story}"
            )
        self.stdout.write(f"Demo-Daten geladen in {time.monotonic() - started:.0f} s.")
        rotate = f".venv/bin/python manage.py rotate_service_key {DEMO_SERVICE}"
        if key:
            self.stdout.write(f"API-Schlüssel des Demo-Dienstes (nur jetzt sichtbar): {key}")
            self.stdout.write(f"Einen neuen Schlüssel gibt / a new key: {rotate}")
        else:
            self.stdout.write(
                "Der API-Schlüssel des Demo-Dienstes wurde beim ersten Start gezeigt und ist nur "
                f"als Hash gespeichert; einen neuen gibt / a new key: {rotate}"
            )
        self.stdout.write(
            f"Anmeldung / login: Benutzer {DEMO_USER!r}, Passwort {DEMO_PASSWORD!r}"
        )
        token = settings.TREUE_METRICS_TOKEN
        if token:
            self.stdout.write(f"Metrik-Token / metrics token (TREUE_METRICS_TOKEN): {token}")
            self.stdout.write(
                f'curl -H "Authorization: Bearer {token}" "$TREUE_URL/metrics"'
            )
        else:
            self.stdout.write(
                "Kein TREUE_METRICS_TOKEN gesetzt: /metrics nur mit Staff-Anmeldung / "
                "no TREUE_METRICS_TOKEN: /metrics for a staff login only"
            )

    def _expert_labels(self, directory: Path, *, wait: int) -> None:
        started = time.monotonic()
        weeks = iso_weeks(weeks=WEEKS + 1)
        # Every week but the last two: last week's answers are this week's review batch
        # (create_review_batches), which the demo user can review in the browser, and the
        # current week is not over.
        reviewed = weeks[:-2]
        use_cases = {u.slug: u for u in UseCase.objects.filter(slug__in=[c.slug for c in
                                                                          USE_CASES])}
        if not use_cases:
            raise CommandError("no demo use case: run seed_demo first")
        waiting = Answer.objects.filter(
            use_case__in=use_cases.values(), created_at__lt=weeks[-2].start,
            status__in=[Answer.Status.QUEUED, Answer.Status.JUDGING],
        )
        deadline = started + wait
        while (count := waiting.count()) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        if count:
            self.stdout.write(f"{count} Antworten der Vorwochen warten noch auf den Prüfer – "
                              "Labels nur für die schon geprüften")
        else:
            self.stdout.write(f"Vorwochen geprüft nach {time.monotonic() - started:.0f} s.")
        known = {a.id: a for a in load_answers()}
        directory.mkdir(parents=True, exist_ok=True)
        refused = []
        for case in USE_CASES:
            use_case = use_cases.get(case.slug)
            if use_case is None:
                continue
            path = directory / f"{case.slug}.jsonl"
            with path.open("w", encoding="utf-8") as out:
                for line in _expert_lines(use_case, reviewed, known):
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
            self.stdout.write(f"python manage.py import_expert_labels {path} "
                              f"--use-case {case.slug} --reviewer {DEMO_EXPERT}")
            try:
                call_command("import_expert_labels", str(path), use_case=case.slug,
                             reviewer=DEMO_EXPERT, stdout=self.stdout, stderr=self.stderr)
            except CommandError as e:
                refused.append(f"{case.slug}: {e}")
        self.stdout.write(f"Expertenlabels importiert nach {time.monotonic() - started:.0f} s.")
        if refused:
            raise CommandError("; ".join(refused))


def _expert_lines(
    use_case: UseCase, weeks: list[Week], known: dict[str, DemoAnswer]
) -> Iterator[dict[str, Any]]:
    """A review batch's worth of expert labels per week: answers of the random sample (as the
    weekly batch draws them) that the judge scored, in an order fixed by their ids, as many as
    the use case's batch size.

    The same every time the demo starts: the answers the experts reviewed on an earlier start
    come first and count towards the batch (their lines again, which the import reports as
    already there), and only a batch left short (the judge had not scored enough yet) is filled
    up with answers nobody reviewed. Drawing from the unreviewed answers alone gave every
    restart a new batch on top of the old one."""
    for week in weeks:
        in_week = Answer.objects.filter(
            use_case=use_case, created_at__gte=week.start, created_at__lt=week.end,
            in_random_sample=True, current_run__status=JudgeRun.Status.SUCCEEDED,
            current_run__score__isnull=False,
        )
        imported = in_week.filter(review_items__batch__imported=True)
        unreviewed = in_week.filter(review_items__isnull=True)
        lines = [
            line for answer in _by_id(imported)
            if (line := _expert_line(answer, known)) is not None
        ]
        for answer in _by_id(unreviewed):
            if len(lines) >= use_case.review_batch_size:
                break
            if (line := _expert_line(answer, known)) is not None:
                lines.append(line)
        yield from sorted(lines, key=lambda line: _order(line["external_id"]))


def _order(external_id: str) -> bytes:
    return hashlib.sha256(external_id.encode()).digest()


def _by_id(answers: QuerySet[Answer]) -> list[Answer]:
    return sorted(
        answers.select_related("current_run").only("external_id", "metadata", "current_run"),
        key=lambda a: _order(a.external_id),
    )


def _expert_line(answer: Answer, known: dict[str, DemoAnswer]) -> dict[str, Any] | None:
    """The demo experts' labels of an answer (None for one that is not RAGTruth's)."""
    demo = known.get(_ragtruth_id(answer))
    if demo is None:
        return None
    run = answer.current_run
    assert run is not None
    if run.judge_model == DEMO_JUDGE_MODEL:
        claims = list(run.claims.order_by("position").values_list("text", flat=True))
        labels = [label.value for label in expert_labels(demo, claims)]
        return {"external_id": answer.external_id, "labels": labels}
    # Another judge's claims are its own words, which RAGTruth's spans cannot be matched to:
    # the experts' score of the whole answer instead.
    return {"external_id": answer.external_id, "score": expert_score(demo)}


def _ragtruth_id(answer: Answer) -> str:
    """The RAGTruth answer behind a demo answer (earlier demos named it in the id)."""
    given = answer.metadata.get("ragtruth_id") if isinstance(answer.metadata, dict) else None
    return str(given) if given else answer.external_id.removeprefix("ragtruth-")
