"""Anonymise answers older than their use case's retention period (also run daily by beat)."""

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from monitoring.models import UseCase
from monitoring.services import retention


class Command(BaseCommand):
    help = (
        "Anonymise answers older than their use case's retention_days (question, answer, "
        "chunks and verdict texts are removed; the figures stay)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--use-case", metavar="SLUG", help="only this use case")
        parser.add_argument("--dry-run", action="store_true",
                            help="count what would be anonymised, change nothing")

    def handle(self, *args: object, **opts: object) -> None:
        slug = opts.get("use_case")
        if slug is not None and not UseCase.objects.filter(slug=str(slug)).exists():
            raise CommandError(f"no use case {slug!r}")
        dry_run = bool(opts["dry_run"])
        if slug is None:  # whole months belong to every use case in them
            for month in retention.months_drop(dry_run=dry_run):
                verb = "would drop" if dry_run else "dropped"
                self.stdout.write(f"{verb} the month {month.month:%Y-%m}: {month.answers} "
                                  f"answers, {month.runs} judge runs (its figures stay)")
        results = retention.retention_apply_all(
            dry_run=dry_run, slug=str(slug) if slug is not None else None
        )
        if not results:
            self.stdout.write("no use case has a retention period")
        for r in results:
            if r.retention_days is None:
                self.stdout.write(f"{r.use_case}: keeps answers forever (no retention_days)")
                continue
            held = r.held_in_review + r.held_for_judge
            done = r.due - held if dry_run else r.anonymised
            verb = "would anonymise" if dry_run else "anonymised"
            cutoff = timezone.localtime(r.cutoff) if r.cutoff else None
            self.stdout.write(
                f"{r.use_case}: {verb} {done} of {r.due} answers older than "
                f"{r.retention_days} days (before {cutoff:%Y-%m-%d %H:%M %Z}); held back: "
                f"{r.held_in_review} in an unfinished review, {r.held_for_judge} waiting "
                f"for the judge"
            )
