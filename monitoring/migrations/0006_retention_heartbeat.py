"""Retention per use case (UseCase.retention_days, Answer.anonymised_at and the partial index of
the answers retention still has to look at) and the workers' heartbeats for /health.

On PostgreSQL the index is built CONCURRENTLY: a plain CREATE INDEX would block ingest for as
long as it reads a table of millions of answers. That cannot run in a transaction, hence
atomic = False; the other operations are instant (a nullable column without default).
"""

import django.core.validators
from django.db import migrations, models

_INDEX = models.Index(
    condition=models.Q(("anonymised_at__isnull", True)),
    fields=["use_case", "created_at"],
    name="answer_retention_due",
)
_CREATE_PG = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS answer_retention_due ON monitoring_answer "
    "(use_case_id, created_at) WHERE anonymised_at IS NULL"
)


def _create_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_CREATE_PG)
    else:
        schema_editor.add_index(apps.get_model("monitoring", "Answer"), _INDEX)


def _drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS answer_retention_due")
    else:
        schema_editor.remove_index(apps.get_model("monitoring", "Answer"), _INDEX)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("monitoring", "0005_answer_dash_sampled"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerHeartbeat",
            fields=[
                ("id", models.BigAutoField(
                    auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                )),
                ("hostname", models.CharField(max_length=255, unique=True)),
                ("last_seen", models.DateTimeField()),
                ("started_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "Worker-Lebenszeichen",
                "verbose_name_plural": "Worker-Lebenszeichen",
            },
        ),
        migrations.AddField(
            model_name="answer",
            name="anonymised_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="anonymisiert"),
        ),
        migrations.AddField(
            model_name="usecase",
            name="retention_days",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Ältere Antworten werden anonymisiert: Frage, Antwort, Abschnitte und "
                "Urteilstexte werden gelöscht, die Kennzahlen bleiben. Leer: unbegrenzt. "
                "Mindestens 28 Tage, damit die Wochenprüfung ihre Antworten behält.",
                null=True,
                validators=[django.core.validators.MinValueValidator(28)],
                verbose_name="Aufbewahrung in Tagen",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="answer", index=_INDEX)],
            database_operations=[
                migrations.RunPython(_create_index, _drop_index, elidable=False),
            ],
        ),
        migrations.AddConstraint(
            model_name="usecase",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("retention_days__isnull", True), ("retention_days__gte", 28),
                    _connector="OR",
                ),
                name="use_case_retention_min",
            ),
        ),
    ]
