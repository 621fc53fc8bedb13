from typing import Any

from django.core.management.base import BaseCommand, CommandError

from common.domain.weeks import format_week, parse_week
from review import services


class Command(BaseCommand):
    help = (
        "Create this ISO week's review batch for every active use case, drawn from the judged "
        "answers of the week before. Running it again creates nothing new."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--week", help="ISO week of the review, like 2026-W49 (default: the current week)"
        )
        parser.add_argument(
            "--wait", type=int, default=0, metavar="SECONDS",
            help="first wait (up to SECONDS) until the judge has scored last week's sampled "
                 "answers, so the batch is drawn from all of them",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        given = opts.get("week")
        if given is None:
            week = services.current_week()
        else:
            try:
                week = format_week(*parse_week(str(given).strip()))
            except ValueError as e:
                raise CommandError(
                    f"--week {given!r}: expected an ISO week like 2026-W49 that the year has"
                ) from e
        if opts.get("wait"):
            waiting = services.wait_for_judge(week=str(week), seconds=int(opts["wait"]))
            if waiting:
                self.stdout.write(f"{waiting} Antworten warten noch auf den Prüfer – "
                                  "die Prüfung wird aus den schon geprüften gezogen")
        for result in services.review_batches_create(week=str(week)):
            slug = result.use_case.slug
            if result.batch is None:
                self.stdout.write(f"{slug} {week}: keine geprüften Antworten in der Vorwoche, "
                                  "keine Prüfung angelegt")
                continue
            batch = result.batch
            size = batch.items.count()
            state = "angelegt" if result.created else "gab es schon"
            line = (f"{slug} {week}: {size} Antworten aus {batch.source_week} ({state})")
            if size < batch.target_size:
                line += f" – nur {batch.available} geprüfte Antworten, alle genommen"
            self.stdout.write(line)
