"""token_data: from a JSON column to bytes (MessagePack, see logprobs.pack_compact).

On PostgreSQL the existing documents become their JSON text as bytes, in place, which
logprobs.unpack_compact reads as it reads MessagePack; new answers are stored packed. Back,
each row is unpacked and written as JSON again.
"""

import json

from django.db import migrations

import monitoring.models
from monitoring.domain.compact import unpack_compact

BACKWARDS_SLICE = 2000  # rows read and rewritten at a time when rolling back
TO_BYTES = (
    "ALTER TABLE monitoring_answer ALTER COLUMN token_data TYPE bytea"
    " USING convert_to(token_data::text, 'UTF8')"
)


class ToBinary(migrations.AlterField):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # noqa: ANN001, ANN201
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        schema_editor.execute(TO_BYTES)
        return None

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # noqa: ANN001, ANN201
        # First every packed copy becomes its JSON text (still bytes), then the column JSON.
        with schema_editor.connection.cursor() as cursor:
            last = 0
            while True:  # in slices, so that a large table is never in memory at once
                cursor.execute(
                    "SELECT id, token_data FROM monitoring_answer"
                    " WHERE token_data IS NOT NULL AND id > %s ORDER BY id LIMIT %s",
                    [last, BACKWARDS_SLICE],
                )
                rows = cursor.fetchall()
                if not rows:
                    break
                cursor.executemany(
                    "UPDATE monitoring_answer SET token_data = %s WHERE id = %s",
                    [(json.dumps(unpack_compact(data)).encode(), pk) for pk, data in rows],
                )
                last = rows[-1][0]
        if schema_editor.connection.vendor != "postgresql":
            # SQLite copies the values into the rebuilt table; its JSON check wants text.
            schema_editor.execute(
                "UPDATE monitoring_answer SET token_data = CAST(token_data AS TEXT)"
                " WHERE token_data IS NOT NULL"
            )
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        schema_editor.execute(
            "ALTER TABLE monitoring_answer ALTER COLUMN token_data TYPE jsonb"
            " USING convert_from(token_data, 'UTF8')::jsonb"
        )
        return None


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0006_retention_heartbeat"),
    ]

    operations = [
        ToBinary(
            model_name="answer",
            name="token_data",
            field=monitoring.models.CompactTokensField(blank=True, null=True),
        ),
    ]
