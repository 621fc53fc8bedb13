"""A small world with two use cases and a user of every role, for the security tests.

Use case A ("recht") has a service key, an expert, a team lead, judged answers from last week,
this week's review batch, last week's batch with its one answer reviewed, and an investigation;
use case B ("fremd") has its own key, expert, lead and answer. Built with the shared builder
(tests/support/world.py) and the real services (ingest, the judge against the local
OpenAI-compatible server, the review batch and its submission, the investigation's start).
"""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from alarms import services as alarm_services
from alarms.models import AlarmChannel
from common.domain.weeks import shift_week
from investigations import selectors as investigation_selectors
from investigations import services as investigation_services
from investigations.models import Investigation
from monitoring.models import Answer, JudgeRun, Service, UseCase
from review import services as review_services
from review.models import ReviewItem
from tests.review.conftest import ReviewWorld, batch_for
from tests.support.openai_server import ScriptedJudge
from tests.support.world import WorldBuilder

PASSWORD = "pw-for-security-tests-5d1"


@dataclass
class World:
    a: UseCase
    b: UseCase
    service_a: Service
    key_a: str
    service_b: Service
    key_b: str
    answer_a: Answer
    answer_b: Answer
    blind_a: Answer  # in this week's review batch: expert_a reviews it blind (score 1/7)
    run_a: JudgeRun
    item_a: ReviewItem
    reviewed_a: ReviewItem  # in last week's batch, submitted by expert_a with a comment
    investigation_a: Investigation
    channel_a: AlarmChannel  # a Slack channel of A whose address nobody listens at
    users: dict[str, User]


def build_world(builder: WorldBuilder) -> World:
    judge = builder.judge(ScriptedJudge())
    a = builder.use_case("recht", "Rechtsauskunft", sample_rate=1.0)
    b = builder.use_case("fremd", "Fremd", sample_rate=1.0)
    service_a, key_a = builder.service("recht-bot", a)
    service_b, key_b = builder.service("fremd-bot", b)

    def user(name: str, **extra: Any) -> User:
        return builder.user(name, email=f"{name}@example.org", password=PASSWORD, **extra)

    users = {
        "expert_a": user("expertin-a", expert_of=[a]),
        "lead_a": user("leitung-a", lead_of=[a]),
        "expert_b": user("expertin-b", expert_of=[b]),
        "lead_b": user("leitung-b", lead_of=[b]),
        "nobody": user("niemand"),
        "staff": user("verwaltung", is_staff=True),
        "superuser": user("admin", superuser=True),
    }

    this_week = review_services.current_week()
    last_week = shift_week(this_week, -1)
    in_a = ReviewWorld(a, b, service_a, judge, users)
    in_b = ReviewWorld(a, b, service_b, judge, users)
    blind_a = in_a.answer("last-week-1", week=last_week, flagged=True,
                          claims=[("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT"),
                                  ("Kleine Behälter jährlich.", "UNGEDECKT"),
                                  *((f"Behälter {n} nie.", "UNGEDECKT") for n in range(5))],
                          # Alone in its similarity bucket (< 0.5) and its chunk-count bucket:
                          # a cause's figure on it would be its score.
                          chunks=[{"text": f"Abschnitt {n}.", "score": 0.31, "source": "x.pdf"}
                                  for n in range(12)])
    in_a.answer("last-week-2", week=last_week)
    answer_a = in_a.answer("now-a", week=this_week)
    answer_b = in_b.answer("now-b", week=this_week, use_case=b)
    batch = batch_for(use_case=a, week=this_week)
    assert batch.items.filter(answer=blind_a).exists()
    # Last week's batch holds the one answer of the week before, reviewed: the judge said
    # GEDECKT (1.0), the expert UNGEDECKT (0.0), scores apart from the blind answer's 1/7.
    in_a.answer("reviewed-1", week=shift_week(this_week, -2))
    reviewed_a = batch_for(use_case=a, week=last_week).items.get()
    review_services.review_item_save(item=reviewed_a, user=users["expert_a"],
                                     data=review_services.ItemInput(
                                         labels={1: "UNGEDECKT"},
                                         comment="Die Quelle nennt kein Intervall."))
    reviewed_a = review_services.review_item_submit(item=reviewed_a, user=users["expert_a"])
    plan = investigation_selectors.investigation_plan(
        use_case=a, selection=Investigation.Selection.LATEST, n=2, samples=3, temperature=0.7,
        generator_model="gpt-4o-mini",
    )
    investigation = investigation_services.investigation_start(plan=plan, user=users["lead_a"])
    item_a = batch.items.order_by("pk").first()
    assert item_a is not None
    channel_a = alarm_services.alarm_channel_create(
        use_case=a, kind="slack", name="Recht-Team", url="http://127.0.0.1:9/hook",
        user=users["staff"],
    ).channel
    return World(
        a=a, b=b, service_a=service_a, key_a=key_a, service_b=service_b, key_b=key_b,
        answer_a=answer_a, answer_b=answer_b, blind_a=blind_a, run_a=answer_a.judge_runs.get(),
        item_a=item_a, reviewed_a=reviewed_a,
        investigation_a=investigation, channel_a=channel_a, users=users,
    )
