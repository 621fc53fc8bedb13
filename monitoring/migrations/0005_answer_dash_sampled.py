"""The dashboard's calls and cost per week join the judge runs to the sampled answers of a use
case's weeks. This covering partial index hands PostgreSQL those answers' ids from the index
alone (answer_status_time would fetch every one from the table).

PostgreSQL only, and not in the model's Meta: Django's other backends would not use it, and
SQLite cannot build an index with INCLUDE.
"""

from django.db import migrations

_CREATE = (
    "CREATE INDEX IF NOT EXISTS answer_dash_sampled ON monitoring_answer "
    "(use_case_id, created_at) INCLUDE (id) "
    "WHERE status IN ('queued', 'judging', 'judged', 'failed')"
)
_DROP = "DROP INDEX IF EXISTS answer_dash_sampled"


def _run(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0004_dashboard_fields")]

    operations = [migrations.RunPython(_run(_CREATE), _run(_DROP), elidable=False)]
