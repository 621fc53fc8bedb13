from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from monitoring import services
from monitoring.demo import demo_answers
from monitoring.models import Service, UseCase

DEMO_USER = "demo"
DEMO_PASSWORD = "treue-demo"
DEMO_USE_CASE = "demo-wissenssuche"
DEMO_SERVICE = "demo-rag"
BATCH = 100


class Command(BaseCommand):
    help = "Create the demo use case, a demo login and demo answers (safe to run again)."

    def handle(self, *args: object, **opts: object) -> None:
        with transaction.atomic():
            use_case = UseCase.objects.filter(slug=DEMO_USE_CASE).first() or (
                services.use_case_create(
                    slug=DEMO_USE_CASE,
                    name="Demo: Wissenssuche (RAGTruth)",
                    language="en",
                    sample_rate=0.05,
                )
            )
            users = get_user_model().objects
            user = users.filter(username=DEMO_USER).first()
            if user is None:
                user = users.create_superuser(DEMO_USER, "", DEMO_PASSWORD)
            use_case.team_leads.add(user)
            use_case.experts.add(user)
            service = Service.objects.filter(name=DEMO_SERVICE).first()
            key = None
            if service is None:
                service, key = services.service_create(name=DEMO_SERVICE, use_cases=[use_case])

        bodies = list(demo_answers(use_case=use_case.slug, now=timezone.now()))
        created = 0
        for start in range(0, len(bodies), BATCH):
            results = services.answer_ingest_batch(
                service=service, items=bodies[start:start + BATCH]
            )
            created += sum(r.status == 201 for r in results)
        self.stdout.write(f"Demo: {created} neue Antworten ({len(bodies)} insgesamt) "
                          f"im Anwendungsfall {use_case.slug}.")
        if key:
            self.stdout.write(f"API-Schlüssel des Demo-Dienstes (nur jetzt sichtbar): {key}")
        self.stdout.write(
            f"Anmeldung / login: Benutzer {DEMO_USER!r}, Passwort {DEMO_PASSWORD!r}"
        )
