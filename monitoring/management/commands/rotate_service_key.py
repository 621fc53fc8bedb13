from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from monitoring.models import Service
from monitoring.services.use_cases import service_rotate_key

DEFAULT_GRACE_HOURS = 24.0


class Command(BaseCommand):
    help = (
        "Give a RAG service a new API key. The new key is printed once, as the last line; the "
        f"old one keeps working for --grace-hours (default {DEFAULT_GRACE_HOURS:g}) so the "
        "services can move over, then it is refused. Only hashes are stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the service's name (create_service NAME)")
        parser.add_argument(
            "--grace-hours", type=float, default=DEFAULT_GRACE_HOURS, metavar="H",
            help="hours the old key stays valid (0: refused at once)",
        )

    def handle(self, *args: object, **opts: Any) -> None:  # argparse values
        name = str(opts["name"])
        grace_hours = float(opts["grace_hours"])
        if not 0 <= grace_hours <= 24 * 365:
            raise CommandError("--grace-hours must be between 0 and 8760 (a year)")
        service = Service.objects.filter(name=name).first()
        if service is None:
            known = ", ".join(Service.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"unknown service {name!r} (services: {known})")
        if not service.active:
            raise CommandError(f"service {name!r} is revoked; activate it in the admin first")
        key = service_rotate_key(service=service, grace=timedelta(hours=grace_hours))
        if service.previous_key_expires_at is not None:
            until = timezone.localtime(service.previous_key_expires_at)
            self.stdout.write(
                f"new key for service {name}; the old key works until "
                f"{until.isoformat(timespec='minutes')}, then it is refused. "
                "The key below is shown only now:"
            )
        else:
            self.stdout.write(
                f"new key for service {name}; the old key is refused from now on. "
                "The key below is shown only now:"
            )
        self.stdout.write(key)
