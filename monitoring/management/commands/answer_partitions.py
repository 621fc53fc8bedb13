"""The monthly partitions of answers and chunks (PostgreSQL): list them, or make months ahead
or back (before importing history, say)."""

from datetime import date, datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitoring.services import partitions


class Command(BaseCommand):
    help = (
        "List the monthly partitions of answers and chunks, or create them: --ahead N months "
        "from now, --from YYYY-MM up to now (history to import). Rows of such a month in the "
        "default partition move into it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--ahead", type=int, metavar="N",
                            help="create the months from now to N months ahead")
        parser.add_argument("--from", dest="since", metavar="YYYY-MM",
                            help="create the months from this one to now")

    def handle(self, *args: object, **opts: object) -> None:
        if not partitions.enabled():
            raise CommandError("answers are not partitioned here (SQLite, or PostgreSQL before "
                               "migration 0024)")
        ahead, since = opts.get("ahead"), opts.get("since")
        created: list[str] = []
        if since is not None:
            try:
                first = datetime.strptime(str(since), "%Y-%m").date()
            except ValueError as e:
                raise CommandError(f"--from: {since!r} is not a month like 2024-01") from e
            month, now = first, partitions.month_of(date.today())
            if month > now:
                raise CommandError("--from lies in the future; use --ahead")
            while month <= now:
                created += partitions.partitions_ensure(
                    now=partitions.month_start(month), ahead=0
                )
                month = partitions.next_month(month)
        if ahead is not None:
            if not isinstance(ahead, int) or ahead < 0:
                raise CommandError("--ahead must be 0 or more")
            created += partitions.partitions_ensure(ahead=ahead)
        for name in created:
            self.stdout.write(f"created {name}")
        for table, _ in partitions.PARTITIONED:
            have = partitions.partitions(table)
            months = [p.month for p in have if p.month]
            self.stdout.write(
                f"{table}: {len(months)} months"
                + (f", {months[0]:%Y-%m} to {months[-1]:%Y-%m}" if months else "")
                + (", and a default partition" if any(p.month is None for p in have) else "")
            )
