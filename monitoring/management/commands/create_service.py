from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitoring.management.errors import describe
from monitoring.models import Service, UseCase
from monitoring.services.use_cases import service_create


class Command(BaseCommand):
    help = (
        "Create a RAG service and its API key. The key is printed once, as the last line; "
        "only its hash is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--use-case", action="append", required=True, metavar="SLUG",
                            help="a use case the key may send to (repeat for several)")

    def handle(self, *args: object, **opts: Any) -> None:  # argparse values
        name = str(opts["name"])
        if Service.objects.filter(name=name).exists():
            raise CommandError(f"service {name!r} already exists")
        slugs = list(dict.fromkeys(opts["use_case"]))
        use_cases = list(UseCase.objects.filter(slug__in=slugs))
        missing = sorted(set(slugs) - {u.slug for u in use_cases})
        if missing:
            raise CommandError(f"unknown use case: {', '.join(missing)}")
        try:
            service, key = service_create(name=name, use_cases=use_cases)
        except ValidationError as e:
            raise CommandError(describe(e)) from e
        self.stdout.write(
            f"created service {service.name} for {', '.join(slugs)}; "
            "the key below is shown only now:"
        )
        self.stdout.write(key)
