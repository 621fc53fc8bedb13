"""Recompute the dashboards' weekly rollups from the raw answers and judge runs."""

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitoring.models import UseCase
from monitoring.services.rollup_rebuild import rollups_check, rollups_rebuild


class Command(BaseCommand):
    help = (
        "Recompute the weekly rollups the dashboards read from the raw answers (after a bulk "
        "load, a restore or an upgrade). Without --use-case and --weeks it rebuilds everything, "
        "after which the pages read the rollups. --check only compares."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--use-case", metavar="SLUG", action="append",
                            help="only this use case (may be given more than once)")
        parser.add_argument("--weeks", type=int, metavar="N",
                            help="only the last N weeks (this one included)")
        parser.add_argument("--check", action="store_true",
                            help="compare the rollups with a recount; change nothing; exit 1 "
                                 "when they differ")

    def handle(self, *args: object, **opts: object) -> None:
        slugs = opts.get("use_case") or None
        use_cases = None
        if slugs is not None:
            assert isinstance(slugs, list)
            found = {u.slug: u for u in UseCase.objects.filter(slug__in=slugs)}
            missing = [s for s in slugs if s not in found]
            if missing:
                raise CommandError(f"no use case {', '.join(map(repr, missing))}")
            use_cases = list(found.values())
        weeks = opts.get("weeks")
        if weeks is not None and (not isinstance(weeks, int) or weeks < 1):
            raise CommandError("--weeks must be at least 1")
        if opts["check"]:
            differences = rollups_check(use_cases=use_cases, weeks=weeks)
            for line in differences[:50]:
                self.stdout.write(line)
            if differences:
                raise CommandError(f"{len(differences)} rollup rows differ from a recount; "
                                   "run rebuild_rollups")
            self.stdout.write("the rollups agree with a recount")
            return
        started = time.monotonic()
        done = rollups_rebuild(use_cases=use_cases, weeks=weeks)
        seconds = time.monotonic() - started
        rows = ", ".join(f"{n} {name} rows" for name, n in done.rows.items())
        self.stdout.write(
            f"rebuilt {done.use_cases} use case(s): {rows} in {seconds:.1f} s"
            + ("; the pages read the rollups from now on" if done.whole else "")
        )
