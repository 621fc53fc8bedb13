"""The embedded broker's clean-up, against a real kombu SQLAlchemy transport on a temp file."""

from datetime import timedelta
from pathlib import Path

import kombu
import sqlalchemy

from treue_site.broker import delete_delivered_messages


def _rows(url: str) -> list[tuple[bool]]:
    engine = sqlalchemy.create_engine(url.removeprefix("sqla+"))
    with engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text("SELECT visible FROM kombu_message")).fetchall()
    engine.dispose()
    return [tuple(r) for r in rows]


def test_deletes_delivered_and_keeps_pending(tmp_path: Path) -> None:
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    with kombu.Connection(url) as conn:
        queue = conn.SimpleQueue("work")
        for i in range(3):
            queue.put({"n": i})
        message = queue.get(timeout=5)
        message.ack()
        queue.close()
    assert sorted(_rows(url)) == [(False,), (True,), (True,)]

    assert delete_delivered_messages(url, older_than=timedelta(hours=1)) == 0  # too recent
    assert delete_delivered_messages(url, older_than=timedelta(seconds=-60)) == 1
    assert _rows(url) == [(True,), (True,)]


def test_other_brokers_are_left_alone(tmp_path: Path) -> None:
    assert delete_delivered_messages("redis://127.0.0.1:6379/0") == 0
    assert delete_delivered_messages(f"sqla+sqlite:///{tmp_path / 'empty.sqlite3'}") == 0


def test_the_apps_transport_options_work_with_the_embedded_broker(tmp_path: Path) -> None:
    # The SQLAlchemy transport hands transport options to create_engine; an option it does not
    # know there breaks every publish (seen once with polling_interval).
    from treue_site.celery import app

    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    with kombu.Connection(url, transport_options=app.conf.broker_transport_options) as conn:
        queue = conn.SimpleQueue("work")
        queue.put({"n": 1})
        assert queue.get(timeout=5).payload == {"n": 1}
        queue.close()
