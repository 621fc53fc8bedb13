"""Issue 22, point 2 (first part): what partitioning answers by month needs, on every backend.

- `AnswerKey` holds (service, external_id) → answer: a partitioned table cannot keep that
  unique, so ingest's idempotency moves here; filled from the answers.
- Chunks carry their answer's `created_at` (they are partitioned along with it); filled.
- Foreign keys into answers are kept by Django, not by a database constraint (a constraint
  into a partitioned table would need the month too).

The order matters on PostgreSQL: constraints are dropped and indexes made before rows are
written, as a table with pending (deferred) constraint checks cannot be altered.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('monitoring', '0021_rollup_causes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='chunk',
            name='answer',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='monitoring.answer', verbose_name='Antwort'),
        ),
        migrations.AlterField(
            model_name='judgerun',
            name='answer',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='judge_runs', to='monitoring.answer', verbose_name='Antwort'),
        ),
        migrations.CreateModel(
            name='AnswerKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('external_id', models.CharField(max_length=200)),
                ('answer', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='monitoring.answer')),
                ('answer_created_at', models.DateTimeField()),
                ('service', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='monitoring.service')),
            ],
            options={
                'verbose_name': 'Antwortschlüssel',
                'verbose_name_plural': 'Antwortschlüssel',
                'constraints': [models.UniqueConstraint(fields=('service', 'external_id'), name='answerkey_unique_external_id')],
            },
        ),
        migrations.AddIndex(
            model_name='answer',
            index=models.Index(fields=['service', 'external_id'], name='answer_external_id'),
        ),
        migrations.RemoveConstraint(
            model_name='answer',
            name='answer_unique_external_id',
        ),
        migrations.AddField(
            model_name='chunk',
            name='answer_created_at',
            field=models.DateTimeField(null=True, verbose_name='Zeitpunkt der Antwort'),
        ),
        migrations.RemoveConstraint(
            model_name='chunk',
            name='chunk_unique_rank',
        ),
        migrations.RunSQL(
            "UPDATE monitoring_chunk SET answer_created_at = (SELECT a.created_at FROM "
            "monitoring_answer a WHERE a.id = monitoring_chunk.answer_id)",
            migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name='chunk',
            name='answer_created_at',
            field=models.DateTimeField(verbose_name='Zeitpunkt der Antwort'),
        ),
        migrations.AddConstraint(
            model_name='chunk',
            constraint=models.UniqueConstraint(fields=('answer', 'answer_created_at', 'rank'), name='chunk_unique_rank'),
        ),
        migrations.RunSQL(
            "INSERT INTO monitoring_answerkey (service_id, external_id, answer_id, "
            "answer_created_at) SELECT service_id, external_id, id, created_at "
            "FROM monitoring_answer",
            "DELETE FROM monitoring_answerkey",
        ),
    ]
