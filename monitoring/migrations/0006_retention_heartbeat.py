"""Retention per use case (UseCase.retention_days, Answer.anonymised_at and the partial index of
the answers retention still has to look at) and, for /health, the workers' heartbeats and a
partial index of the answers waiting for the judge by the time Treue received them.

On PostgreSQL the indexes are built CONCURRENTLY: a plain CREATE INDEX would block ingest for as
long as it reads a table of millions of answers. That cannot run in a transaction, hence
atomic = False; the other operations are instant (a nullable column without default).
"""

import django.core.validators
from django.db import migrations, models

_RETENTION = models.Index(
    condition=models.Q(("anonymised_at__isnull", True)),
    fields=["use_case", "created_at"],
    name="answer_retention_due",
)
_UNSCORED = models.Index(
    condition=models.Q(("status__in", ["queued", "judging"])),
    fields=["received_at"],
    name="answer_unscored_received",
)
_CREATE_PG = {
    "answer_retention_due": "(use_case_id, created_at) WHERE anonymised_at IS NULL",
    "answer_unscored_received": "(received_at) WHERE status IN ('queued', 'judging')",
}


def _indexes(create: bool):
    def run(apps, schema_editor):
        answer = apps.get_model("monitoring", "Answer")
        for index in (_RETENTION, _UNSCORED):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.execute(
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index.name} ON monitoring_answer "
                    f"{_CREATE_PG[index.name]}"
                    if create else f"DROP INDEX CONCURRENTLY IF EXISTS {index.name}"
                )
            elif create:
                schema_editor.add_index(answer, index)
            else:
                schema_editor.remove_index(answer, index)
    return run


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
            state_operations=[
                migrations.AddIndex(model_name="answer", index=_UNSCORED),
                migrations.AddIndex(model_name="answer", index=_RETENTION),
            ],
            database_operations=[
                migrations.RunPython(_indexes(True), _indexes(False), elidable=False),
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
