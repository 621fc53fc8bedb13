"""The tests' own database on PostgreSQL (tests/settings.py, tests/support/postgres.py): its
flush empties every table, and it keeps only the recent months' partitions of answers."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection
from django.utils import timezone

from monitoring.models import Service, UseCase
from monitoring.services import partitions
from monitoring.services.use_cases import service_create, use_case_create
from tests.support.postgres import HISTORY_KEPT
from tests.support.postgresql_fast_flush import creation

pytestmark = pytest.mark.postgres


@pytest.mark.django_db(transaction=True)
def test_the_flush_empties_every_table_that_refers_to_another() -> None:
    use_case = use_case_create(slug="leeren", name="Leeren", language="de")
    service_create(name="leeren-bot", use_cases=[use_case])
    links = Service.use_cases.through.objects
    assert Service.objects.count() == 1 and links.count() == 1
    assert connection.ops.sql_flush(no_style(), ["monitoring_service"]) == [
        "SET CONSTRAINTS ALL DEFERRED;", 'DELETE FROM "monitoring_service";']
    call_command("flush", interactive=False, verbosity=0)
    assert (UseCase.objects.count(), Service.objects.count(), links.count()) == (0, 0, 0)


@pytest.mark.django_db
def test_the_recent_months_and_those_ahead_have_partitions_and_older_ones_not() -> None:
    months = [p.month for p in partitions.partitions("monitoring_answer") if p.month]
    now = partitions.month_of(timezone.now())
    assert now in months and partitions.next_month(now) in months
    assert partitions.month_of(timezone.now() - HISTORY_KEPT) in months
    assert min(months) >= partitions.month_of(timezone.now() - HISTORY_KEPT)
    assert min(months) < partitions.month_of(timezone.now() - timedelta(days=150))


@pytest.mark.django_db
def test_test_databases_are_copied_from_a_template_of_todays_migrations() -> None:
    template = creation.template_name()
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [template])
        assert cursor.fetchone() is not None
    assert connection.creation.sql_table_creation_suffix() == f'WITH TEMPLATE "{template}"'
