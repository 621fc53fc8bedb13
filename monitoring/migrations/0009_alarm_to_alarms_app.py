"""Alarm moves to its own app (alarms): the table is renamed to alarms_alarm and the model
leaves monitoring's state; alarms 0001 adds it to the alarms app's state. No row is copied."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('monitoring', '0008_threshold_finite'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterModelTable(name='alarm', table='alarms_alarm'),
            ],
            state_operations=[
                migrations.DeleteModel(name='Alarm'),
            ],
        ),
    ]
