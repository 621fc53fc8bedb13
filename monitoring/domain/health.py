"""The health report's verdicts from measured values: plain values in, strings out."""

WORKER_OK = "ok"
WORKER_STALE = "stale"
WORKER_NONE = "none"

STATUS_OK = "ok"
STATUS_DEGRADED = "degraded"
STATUS_UNAVAILABLE = "unavailable"


def worker_status(*, heartbeat_age: float | None, stale_after: float) -> str:
    """"none" when no worker ever reported, "stale" when the newest report is too old."""
    if heartbeat_age is None:
        return WORKER_NONE
    return WORKER_OK if heartbeat_age <= stale_after else WORKER_STALE


def overall_status(
    *,
    database_ok: bool,
    broker_ok: bool,
    worker: str,
    oldest_unscored: float | None,
    backlog_after: float,
) -> str:
    """"unavailable" only without a database (the web tier cannot serve anything then);
    a dead broker or worker, or a judge backlog older than `backlog_after`, is "degraded":
    pages and ingest still work, scoring waits."""
    if not database_ok:
        return STATUS_UNAVAILABLE
    if not broker_ok or worker != WORKER_OK:
        return STATUS_DEGRADED
    if oldest_unscored is not None and oldest_unscored > backlog_after:
        return STATUS_DEGRADED
    return STATUS_OK
