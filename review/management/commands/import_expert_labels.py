"""python manage.py import_expert_labels FILE --use-case SLUG --reviewer USER"""

import sys
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from monitoring.models import UseCase
from review.domain.imports import read_lines
from review.imports import expert_labels_import


class Command(BaseCommand):
    help = (
        "Import expert scores made elsewhere (an annotation tool, an earlier review round) as "
        "submitted reviews. FILE is JSONL, one answer a line: "
        '{"external_id": ..., "score": 0..1} or {"external_id": ..., "labels": ["GEDECKT", '
        '...]} with one label per claim of the judge, in its order. Bad lines are reported with '
        "their number; the others are imported. Running a file again imports nothing twice."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", help="the JSONL file, or - for standard input")
        parser.add_argument("--use-case", required=True, metavar="SLUG")
        parser.add_argument("--reviewer", required=True, metavar="USER",
                            help="the user the reviews are recorded under")

    def handle(self, *args: object, **opts: Any) -> None:
        slug = opts["use_case"]
        use_case = UseCase.objects.filter(slug=slug).first()
        if use_case is None:
            raise CommandError(f"no use case {slug!r}")
        username = opts["reviewer"]
        reviewer = get_user_model().objects.filter(username=username).first()
        if reviewer is None:
            raise CommandError(f"no user {username!r}")
        if not reviewer.is_active:
            raise CommandError(f"the user {username!r} is deactivated")
        name = opts["file"]
        try:
            if name == "-":
                report = expert_labels_import(
                    use_case=use_case, reviewer=reviewer, lines=read_lines(sys.stdin.buffer)
                )
            else:
                with Path(name).open("rb") as raw:
                    report = expert_labels_import(
                        use_case=use_case, reviewer=reviewer, lines=read_lines(raw)
                    )
        except OSError as e:
            raise CommandError(f"cannot read {name}: {e.strerror or e}") from e
        for line, why in report.already:
            self.stdout.write(f"line {line}: skipped, {why}")
        for error in report.errors:
            self.stderr.write(f"line {error.line}: {error.message}")
        self.stdout.write(
            f"{slug}: {len(report.imported)} imported, {len(report.already)} already there, "
            f"{len(report.errors)} refused"
        )
        if report.errors:
            raise CommandError(f"{len(report.errors)} line(s) refused (see above); "
                               "the others were imported")

