from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitoring.domain.sample_rate import DEFAULT_SAMPLE_RATE
from monitoring.management.errors import describe
from monitoring.models import JudgeMode, UseCase
from monitoring.services.use_cases import use_case_create


class Command(BaseCommand):
    help = "Create a use case that RAG services can send answers to."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--language", choices=["de", "en"], default="de")
        parser.add_argument("--sample-rate", type=float, default=DEFAULT_SAMPLE_RATE,
                            help="share of unflagged answers the judge sees (0 < rate <= 1)")
        parser.add_argument("--logprob-threshold", type=float, default=0.5)
        parser.add_argument("--action-threshold", type=float, default=0.85)
        parser.add_argument("--unreviewed", action="store_true",
                            help="answers leave the company without human review")
        parser.add_argument(
            "--judge-mode", choices=JudgeMode.values, default=JudgeMode.BATCHED,
            help="batched: all claims of an answer in one judge call (about a quarter of the "
                 "cost); per-claim: one call per claim with the article's prompt; single: "
                 "decomposition and verdicts in one call",
        )
        parser.add_argument(
            "--no-judge-evidence", dest="judge_evidence", action="store_false",
            help="batched and single: verdicts without the judge's chunk ranks and reason "
                 "(saves about 25 completion tokens per claim)",
        )
        parser.add_argument("--expert", action="append", default=[], metavar="USERNAME")
        parser.add_argument("--team-lead", action="append", default=[], metavar="USERNAME")

    def handle(self, *args: object, **opts: Any) -> None:  # argparse values
        slug = str(opts["slug"])
        if UseCase.objects.filter(slug=slug).exists():
            raise CommandError(f"use case {slug!r} already exists")
        users = get_user_model().objects
        experts = [self._user(users, n) for n in opts["expert"]]
        leads = [self._user(users, n) for n in opts["team_lead"]]
        try:
            use_case = use_case_create(
                slug=slug,
                name=str(opts["name"]),
                language=str(opts["language"]),
                sample_rate=float(opts["sample_rate"]),
                logprob_threshold=float(opts["logprob_threshold"]),
                action_threshold=float(opts["action_threshold"]),
                leaves_unreviewed=bool(opts["unreviewed"]),
                judge_mode=str(opts["judge_mode"]),
                judge_evidence=bool(opts["judge_evidence"]),
            )
        except ValidationError as e:
            raise CommandError(describe(e)) from e
        use_case.experts.set(experts)
        use_case.team_leads.set(leads)
        self.stdout.write(f"created use case {use_case.slug} ({use_case.name})")

    @staticmethod
    def _user(users, username: str):
        try:
            return users.get_by_natural_key(username)
        except users.model.DoesNotExist as e:
            raise CommandError(f"no user {username!r}") from e
