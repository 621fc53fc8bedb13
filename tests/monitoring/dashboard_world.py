"""The world of the team lead's page tests (test_dashboard_pages.py, test_dashboard_last_week.py).

Answers come in through the real ingest and are judged by the real judge service against the
local OpenAI-compatible server, whose verdicts the tests script. Which unflagged answers the
random draw takes is decided by the same hash as in production; the tests pick external ids so
that exactly the wanted number is drawn. The expected figures are worked out by hand below.

The scenario of last week in use case A (action threshold 0.9, sample rate 0.25):

- 10 flagged answers, all judged: 5 with one UNGEDECKT claim (score 0), 5 with GEDECKT +
  UNGEDECKT (0.5); stratum mean 0.25; 15 claims, 5 supported.
- 40 unflagged answers, 10 drawn and judged with two GEDECKT claims each (1.0).

Stratified estimate (10·0.25 + 40·1.0) / 50 = 0.85; the naive mean of the 20 judged answers,
(2.5 + 10) / 20 = 0.625, must not appear. Claim share (0.2·5/10 + 0.8·20/10) / (0.2·15/10 +
0.8·20/10) = 1.7 / 1.9 = 0.894. Below the threshold: the flagged stratum, 10 / 50 = 20 %.
Flagged share 20 %. Judge calls: a decomposition plus one call per claim, 5·2 + 5·3 + 10·3 = 55.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from html import unescape
from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone, translation

from dashboard.domain.statistics.cells import Estimate, Stratum
from dashboard.domain.statistics.precision import tops_at_estimate
from dashboard.selectors import weeks as dashboard_weeks
from dashboard.selectors.weeks import Week, iso_weeks
from ingest import services
from ingest.domain.sampling import random_draw
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgePrice, JudgeRun, Service, UseCase
from tests.support.openai_server import ScriptedJudge
from tests.support.text import found
from tests.support.world import WorldBuilder

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
GENERATOR = "gpt-4o-mini"
JUDGE = "judge-x"
OTHER_JUDGE = "judge-y"
PASSWORD = "pw-only-for-tests-77d"
RATE = 0.25
SINGLE = "Wie oft muss der Behälter geprüft werden?"
MULTI = "Wie oft muss der Behälter geprüft werden, und was kostet die Prüfung?"


def logprobs(text: str, flag: bool) -> dict[str, Any]:
    """One token per word, p = 0.99; with `flag`, "Behälter" gets p = 0.05 (flags at 0.5)."""
    content = []
    for piece in re.findall(r"\s*\S+", text):
        p = 0.05 if flag and piece.strip() == "Behälter" else 0.99
        content.append({"token": piece, "logprob": math.log(p), "bytes": list(piece.encode())})
    return {"content": content}


@dataclass
class DashWorld:
    a: UseCase
    b: UseCase
    service: Service
    judge: ScriptedJudge
    users: dict[str, User]
    weeks: list[Week] = field(default_factory=lambda: iso_weeks(weeks=dashboard_weeks.WEEKS))

    @property
    def this_week(self) -> Week:
        return self.weeks[-1]

    @property
    def last_week(self) -> Week:
        return self.weeks[-2]

    def moment(self, week: Week) -> datetime:
        """A moment in the week that has passed: Wednesday noon, or just now in this week."""
        return min(week.start + timedelta(days=2, hours=12), timezone.now() - timedelta(seconds=5))

    def ids(self, prefix: str, drawn: int, not_drawn: int) -> tuple[list[str], list[str]]:
        """External ids of which exactly `drawn` fall in the random sample (same hash as
        ingest), and `not_drawn` that do not."""
        hit: list[str] = []
        miss: list[str] = []
        i = 0
        while len(hit) < drawn or len(miss) < not_drawn:
            external_id = f"{prefix}-{i}"
            i += 1
            if random_draw(str(self.service.pk), external_id) < RATE:
                if len(hit) < drawn:
                    hit.append(external_id)
            elif len(miss) < not_drawn:
                miss.append(external_id)
        return hit, miss

    def answer(
        self, external_id: str, *, week: Week, verdicts: list[str] | None = None,
        flagged: bool = False, use_case: UseCase | None = None, question: str = SINGLE,
        chunk_scores: tuple[float, ...] = (0.85, 0.7), judge: bool = True,
    ) -> Answer:
        """Ingest an answer created in `week`; if it is sampled, judge it with one claim per
        verdict (an empty list: no claims, an abstention); `judge=False` leaves its run open."""
        use_case = use_case or self.a
        text = f"Antwort {external_id}: Der Behälter wird alle 5 Jahre geprüft."
        body: dict[str, Any] = {
            "external_id": external_id, "use_case": use_case.slug, "question": question,
            "answer": text, "model": GENERATOR,
            "chunks": [{"text": f"Abschnitt {i}", "score": s} for i, s in enumerate(chunk_scores)],
            "logprobs": logprobs(text, flagged),
            "created_at": self.moment(week).isoformat(),
        }
        result = services.answer_ingest(
            service=self.service, payload=AnswerIn.model_validate(body), raw=body
        )
        assert result.outcome == IngestOutcome.CREATED, result.errors
        answer = result.answer
        assert answer is not None
        assert answer.flagged == flagged
        run = answer.judge_runs.filter(status=JudgeRun.Status.PENDING).first()
        if run is not None and judge:
            verdicts = [G] if verdicts is None else verdicts
            claims = [f"{external_id} sagt Punkt {i}." for i in range(len(verdicts))]
            self.judge.claims = claims
            self.judge.verdicts.update(dict(zip(claims, verdicts, strict=True)))
            judge_run_execute(run_id=run.pk)
        answer.refresh_from_db()
        return answer

    def last_week_scenario(self, *, use_case: UseCase | None = None, prefix: str = "lw",
                           week: Any = None) -> None:
        """The scenario of the module docstring, in last week (or `week`)."""
        use_case = use_case or self.a
        week = week or self.last_week
        for i in range(10):
            self.answer(f"{prefix}-f{i}", week=week, flagged=True, use_case=use_case,
                        verdicts=[U] if i < 5 else [G, U], question=MULTI,
                        chunk_scores=tuple([0.45] * 12))
        drawn, rest = self.ids(f"{prefix}-u", 10, 30)
        for external_id in drawn:
            self.answer(external_id, week=week, verdicts=[G, G], use_case=use_case)
        for external_id in rest:
            answer = self.answer(external_id, week=week, use_case=use_case)
            assert not answer.sampled

    def this_week_good(self, *, drawn: int = 12, not_drawn: int = 8, prefix: str = "tw") -> None:
        """This week in A: only unflagged answers, the drawn ones fully supported."""
        hit, miss = self.ids(prefix, drawn, not_drawn)
        for external_id in hit:
            self.answer(external_id, week=self.this_week, verdicts=[G])
        for external_id in miss:
            self.answer(external_id, week=self.this_week)



def build_world(world_builder: WorldBuilder) -> DashWorld:
    """Use cases A and B, a service for both, a price for the judge, and the users."""
    judge = world_builder.judge(ScriptedJudge())
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"), currency="EUR")
    a = world_builder.use_case("auskunft", "Auskunft", sample_rate=RATE, action_threshold=0.9)
    b = world_builder.use_case("vertrieb", "Vertrieb", sample_rate=RATE)
    service, _ = world_builder.service("dash-bot", a, b)

    def user(name: str, **extra: Any) -> User:
        return world_builder.user(name, email=f"{name}@example.org", password=PASSWORD, **extra)

    users = {
        "lead_a": user("leitung-a", lead_of=[a]), "lead_b": user("leitung-b", lead_of=[b]),
        "expert_a": user("expertin", expert_of=[a]),
        "staff": user("verwaltung", is_staff=True), "nobody": user("niemand"),
    }
    return DashWorld(a, b, service, judge, users)


def client_for(world: DashWorld, who: str) -> Client:
    client = Client()
    client.force_login(world.users[who])
    return client


def text_of(html: str) -> str:
    html = re.sub(r"<script.*?</script>", " ", html, flags=re.DOTALL)
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()
    return re.sub(r" ([.,;:)])", r"\1", text)


def figure(html: str, element_id: str) -> dict[str, Any]:
    match = re.search(
        rf'<script id="{re.escape(element_id)}" type="application/json">(.*?)</script>', html,
        re.DOTALL,
    )
    assert match, f"json_script {element_id} is on the page"
    return json.loads(match.group(1))


def role(fig: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [t for t in fig["data"] if t["meta"]["role"] == name]
    return found


def de(value: float | None, digits: int = 2) -> str:
    """A number as the German page writes it (floatformat: half up, decimal comma)."""
    from django.template.defaultfilters import floatformat

    # German whatever language an earlier test's request left active in this thread.
    with translation.override("de"):
        return str(floatformat(value, digits))


def estimate_text(estimate: Estimate) -> str:
    """An estimate as the pages write it; an interval that ends at its estimate carries the
    mark that the footnote explains (issue 41)."""
    mark = " *" if tops_at_estimate(estimate) else ""
    return (f"{de(estimate.value)} ({de(estimate.low)}–{de(estimate.high)}){mark} "
            f"n = {estimate.n}")



def hand_strata() -> list[Stratum]:
    return [Stratum(10, [0.0] * 5 + [0.5] * 5),
            Stratum(40, [1.0] * 10)]


# The weekly table's columns: the week (the row's header), the week's counts (answers,
# flagged, judged), the estimates, calls, cost and judges.
WEEK, COUNTS, ESTIMATE, POOLED, EXPERT, BELOW, ABSTENTIONS, CLAIMS, CALLS, COST, JUDGES = range(11)


def week_row(html: str, week: Week) -> list[str]:
    row = re.search(rf'<tr data-week="{week.label}"[^>]*>(.*?)</tr>', html, re.DOTALL)
    assert row, f"{week.label} has a row in the table"
    return [text_of(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1),
                                           re.DOTALL)]




def weekly_table(html: str) -> tuple[list[str], list[tuple[int, str]]]:
    """The weekly table's header texts, and its totals row as (first column, text) per cell,
    colspans counted."""
    table = found(r'<table class="usage numbers dash-table">(.*?)</table>', html,
                  re.DOTALL).group(1)
    head = found(r"<thead>(.*?)</thead>", table, re.DOTALL).group(1)
    headers = [text_of(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", head, re.DOTALL)]
    foot = found(r"<tfoot>(.*?)</tfoot>", table, re.DOTALL).group(1)
    totals, column = [], 0
    for attrs, cell in re.findall(r"<t[hd]([^>]*)>(.*?)</t[hd]>", foot, re.DOTALL):
        span = re.search(r'colspan="(\d+)"', attrs)
        totals.append((column, text_of(cell)))
        column += int(span.group(1)) if span else 1
    assert column == len(headers), "the totals row is as wide as the table"
    return headers, totals

