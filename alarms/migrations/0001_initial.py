"""The Alarm model, moved here from monitoring (monitoring 0009 renamed its table to
alarms_alarm). The model is created in the migration state only: the table and its rows exist.
The content type is renamed too, so permissions granted on alarms stay granted."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def _content_type_to(app_label: str, from_label: str):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        if ContentType.objects.filter(app_label=app_label, model="alarm").exists():
            return
        ContentType.objects.filter(app_label=from_label, model="alarm").update(app_label=app_label)

    return move


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("monitoring", "0009_alarm_to_alarms_app"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Alarm",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("action", "Handlungssignal"),
                                    ("drift", "Kalibrierungsdrift"),
                                    ("decomposition", "Zerlegung oft falsch"),
                                    ("missed_review", "Wochenprüfung versäumt"),
                                ],
                                max_length=20,
                                verbose_name="Art",
                            ),
                        ),
                        ("key", models.CharField(max_length=50)),
                        ("message", models.TextField(verbose_name="Meldung")),
                        ("details", models.JSONField(blank=True, default=dict)),
                        (
                            "opened_at",
                            models.DateTimeField(
                                default=django.utils.timezone.now, verbose_name="ausgelöst"
                            ),
                        ),
                        (
                            "cleared_at",
                            models.DateTimeField(blank=True, null=True, verbose_name="erledigt"),
                        ),
                        ("mailed_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "use_case",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="alarms",
                                to="monitoring.usecase",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "Alarm",
                        "verbose_name_plural": "Alarme",
                        "ordering": ["-opened_at", "-id"],
                        "indexes": [
                            models.Index(
                                condition=models.Q(("cleared_at__isnull", True)),
                                fields=["use_case", "kind"],
                                name="alarm_open",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("use_case", "kind", "key"), name="alarm_unique_key"
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(
            _content_type_to("alarms", "monitoring"),
            _content_type_to("monitoring", "alarms"),
        ),
    ]
