"""Fill the dashboard's per-answer figures for answers stored before ingest computed them.

`min_content_probability` (the threshold tuner) and `multi_part` (a cause) are computed at
ingest since migration 0004. Answers from before carry NULL in `multi_part`, which ingest never
leaves NULL, so that marks the rows still to do; running the command again does no harm and
resumes where it stopped. A command rather than a data migration: a million rows take minutes,
and a deploy should not wait for them. The rollups of the use cases it changed are rebuilt at
the end (the diagnosis counts answers by these figures).
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from ingest.domain import questions
from ingest.domain.content_probability import min_content_probability
from monitoring.models import Answer, UseCase
from monitoring.services.rollup_rebuild import rollups_rebuild

BATCH = 1000


class Command(BaseCommand):
    help = "Compute min_content_probability and multi_part for answers that lack them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true",
                            help="recompute every answer, not only those without the figures")
        parser.add_argument("--batch-size", type=int, default=BATCH)

    def handle(self, *args: object, **opts: Any) -> None:  # argparse values
        batch_size = max(1, int(opts["batch_size"]))
        answers = Answer.objects.order_by("pk")
        if not opts["all"]:
            answers = answers.filter(multi_part__isnull=True)
        done, last = 0, 0
        touched: set[int] = set()
        while True:
            # Keyset pagination: each batch starts after the last primary key, so updated rows
            # dropping out of the filter do not shift the pages.
            batch = list(
                answers.filter(pk__gt=last)
                .select_related("use_case")
                .only("pk", "question", "text", "token_data", "use_case_id",
                      "use_case__language")[:batch_size]
            )
            if not batch:
                break
            for answer in batch:
                answer.min_content_probability = min_content_probability(
                    answer.text, answer.token_data
                )
                answer.multi_part = questions.is_multi_part(
                    answer.question, answer.use_case.language
                )
            with transaction.atomic():
                Answer.objects.bulk_update(batch, ["min_content_probability", "multi_part"])
            done += len(batch)
            last = batch[-1].pk
            touched.update(a.use_case_id for a in batch)
        self.stdout.write(f"updated {done} answers")
        if touched:
            rebuilt = rollups_rebuild(
                use_cases=UseCase.objects.filter(pk__in=touched).order_by("pk")
            )
            self.stdout.write(f"rebuilt the rollups of {rebuilt.use_cases} use cases")
