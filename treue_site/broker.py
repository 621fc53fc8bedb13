"""Housekeeping for the embedded broker (kombu's SQLAlchemy transport on SQLite).

That transport never deletes a message: on delivery it only marks the row invisible, so the
table grows by one row per task forever. Rows that are invisible were handed to a worker; if
that worker dies without acknowledging, kombu re-publishes the message as a new row, so
deleting old invisible rows loses nothing.
"""

from datetime import datetime, timedelta

import sqlalchemy

# Keep an hour of delivered messages: enough to look at what just ran, never a growing table.
DELIVERED_RETENTION = timedelta(hours=1)


def delete_delivered_messages(
    broker_url: str, *, older_than: timedelta = DELIVERED_RETENTION
) -> int:
    """Delete delivered messages of an `sqla+` broker; other brokers clean up after themselves."""
    if not broker_url.startswith("sqla+"):
        return 0
    engine = sqlalchemy.create_engine(broker_url.removeprefix("sqla+"))
    try:
        if not sqlalchemy.inspect(engine).has_table("kombu_message"):
            return 0
        # kombu stamps rows with naive local time (datetime.now), so compare in the same terms.
        cutoff = datetime.now() - older_than
        with engine.begin() as conn:
            result = conn.execute(
                sqlalchemy.text(
                    "DELETE FROM kombu_message WHERE visible = :hidden "
                    "AND (timestamp IS NULL OR timestamp < :cutoff)"
                ),
                {"hidden": False, "cutoff": cutoff},
            )
        return result.rowcount or 0
    finally:
        engine.dispose()
