"""The embedded broker's clean-up, against a real kombu SQLAlchemy transport on a temp file."""

from datetime import timedelta
from pathlib import Path

import kombu
import sqlalchemy

from common.broker import delete_delivered_messages


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
    # know there breaks every publish (seen once with polling_interval, and with Redis's socket
    # timeouts, which settings.py therefore gives a Redis broker only).
    from common.broker import transport_options

    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    with kombu.Connection(url, transport_options=transport_options(url)) as conn:
        queue = conn.SimpleQueue("work")
        queue.put({"n": 1})
        assert queue.get(timeout=5).payload == {"n": 1}
        queue.close()


def test_a_redis_broker_gets_socket_timeouts_and_the_embedded_one_does_not() -> None:
    from common.broker import transport_options

    redis = transport_options("redis://127.0.0.1:6379/0")
    assert redis["socket_timeout"] == 2.0 and redis["socket_connect_timeout"] == 1.0
    assert redis["max_retries"] == 1
    embedded = transport_options("sqla+sqlite:////tmp/broker.sqlite3")
    assert "socket_timeout" not in embedded and embedded["max_retries"] == 1
