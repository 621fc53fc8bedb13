"""Price the past judge runs that ran without a price, for every model that has one now."""

from django.core.management.base import BaseCommand

from monitoring.services.prices import past_runs_price_all


class Command(BaseCommand):
    help = (
        "Price the finished judge runs that have no cost yet, for every judge model that has "
        "a price now (Verwaltung › Preise der Prüfmodelle), and the usage rollups with them. "
        "Runs nightly as well; safe to run at any time."
    )

    def handle(self, *args: object, **opts: object) -> None:
        done = past_runs_price_all()
        for model, runs in sorted(done.items()):
            self.stdout.write(f"{model}: {runs} runs priced")
        self.stdout.write(f"{sum(done.values())} runs priced")
