"""Alarm moved from monitoring to its own app: a database migrated from before the move keeps
its alarms (and rolling back keeps them too), and the old admin address leads to the new one."""

import pytest
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from alarms.models import Alarm

# It migrates the schema back and forth: seconds, so the fast part leaves it to CI.
pytestmark = pytest.mark.integration

MONITORING_BEFORE = ("monitoring", "0008_threshold_finite")
BEFORE = [MONITORING_BEFORE, ("alarms", None)]


def migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def leaves() -> list[tuple[str, str | None]]:
    """Every app's last migration: going back unapplies the other apps' migrations that depend
    on a later one of monitoring's, and the next tests need them."""
    return list(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.fixture
def before_move():
    executor = migrate(BEFORE)
    yield executor.loader.project_state([MONITORING_BEFORE]).apps
    migrate(leaves())


@pytest.mark.django_db(transaction=True)
def test_an_alarm_stored_before_the_move_is_found_after_it_and_after_rolling_back(before_move):
    apps = before_move
    use_case = apps.get_model("monitoring", "UseCase").objects.create(
        slug="kundenservice", name="Kundenservice"
    )
    old = apps.get_model("monitoring", "Alarm").objects.create(
        use_case=use_case, kind="drift", key="cusum:2026-W48", message="Drift",
        details={"week": "2026-W48"},
    )
    ContentType.objects.filter(app_label="alarms").delete()
    moved_type = ContentType.objects.get_or_create(app_label="monitoring", model="alarm")[0]

    migrate(leaves())
    alarm = Alarm.objects.get(pk=old.pk)
    assert (alarm.use_case_id, alarm.kind, alarm.key, alarm.details) == (
        use_case.pk, "drift", "cusum:2026-W48", {"week": "2026-W48"},
    )
    # The content type moved along, so permissions granted on it still hold.
    moved_type.refresh_from_db()
    assert moved_type.app_label == "alarms"
    # The constraint that makes raising idempotent came along with the table, and new ids
    # follow the old ones.
    with pytest.raises(IntegrityError), transaction.atomic():
        Alarm.objects.create(use_case_id=use_case.pk, kind="drift", key="cusum:2026-W48",
                             message="noch einmal")
    new = Alarm.objects.create(use_case_id=use_case.pk, kind="drift", key="bias:2026-W49",
                               message="Abweichung")
    assert new.pk > old.pk

    migrate(BEFORE)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, key FROM monitoring_alarm ORDER BY id")
        assert cursor.fetchall() == [(old.pk, "cusum:2026-W48"), (new.pk, "bias:2026-W49")]


@pytest.mark.django_db
def test_the_old_admin_address_of_alarms_redirects_to_the_new_one(client: Client):
    assert client.get("/admin/monitoring/alarm/?kind=drift").headers["Location"] == (
        "/admin/alarms/alarm/?kind=drift"
    )
    response = client.get("/admin/monitoring/alarm/7/change/")
    assert response.status_code == 301
    assert response.headers["Location"] == "/admin/alarms/alarm/7/change/"

    client.force_login(User.objects.create_superuser("admin", "admin@example.org", "pw"))
    assert client.get("/admin/alarms/alarm/").status_code == 200
    assert client.get("/admin/monitoring/alarm/", follow=True).status_code == 200
