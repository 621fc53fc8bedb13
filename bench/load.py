"""Load test of the ingest API: many concurrent clients, a realistic mix, nothing lost.

For ``--duration`` seconds ``--clients`` client threads post to ``POST /api/v1/answers`` and
``POST /api/v1/answers/batch`` (batches of ``--batch-min`` to ``--batch-max`` items) on gunicorn
and PostgreSQL, over loopback. Of the answers sent, ``--invalid-share`` are client mistakes (a
missing question, a logprob above 0, a non-finite logprob, an unknown use case, a use case the
key may not send to, a wrong type, an oversized external_id), mixed into batches with valid
answers; ``--duplicate-share`` are re-sends of an answer sent before - most with the same content
(the API must answer 200 and store nothing), ``--changed-share`` of them with different content
(409, and the stored row must stay as it was). Duplicates may race their original: whichever
arrives first is stored, so the checks are per external_id, not per send.

Afterwards it counts rows in PostgreSQL: every valid answer stored exactly once with its chunks,
no invalid one stored, the stored content the one acknowledged with 201, one judge run per
sampled answer. It prints requests/s, answers/s, latency p50/p99 (single and batch apart), the
counts and PASS/MISS lines, and the CPU of gunicorn, PostgreSQL, this script and everything
else, so a reader sees where the time went on a shared machine.

The database, the use cases, the service key and gunicorn come from ``bench/ingest.py`` (see its
docstring); gunicorn runs with ``TREUE_API_RATE_LIMIT=0`` (rate limiting off), so a 429 is a MISS
of the setup, reported apart, not a loss. Request bodies come from a pool encoded before the
clock starts; a request only splices its external ids in. The server is always stopped and the
database dropped at the end (unless ``--keep``), also on errors, Ctrl-C, SIGTERM and the overall
``--time-limit``.

    .venv/bin/python bench/load.py --clients 64 --duration 60
    .venv/bin/python bench/load.py --clients 4 --duration 3 --pool 50     # a quick look

Exit status: 0 when nothing was lost, duplicated, wrongly accepted or answered 5xx (a missed
throughput target alone is not a failure), 1 otherwise.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/statistics.py would
# shadow the standard library's statistics module (Django and this file import it).
_sys.path[0] = str(_Path(__file__).resolve().parents[1])

import argparse
import contextlib
import copy
import http.client
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from random import Random
from typing import Any
from urllib.parse import urlsplit

import orjson

from bench import ingest  # bench/ingest.py: the ingest bench's setup and helpers

OTHER_USE_CASE = "bench-other"  # exists, but the bench key may not send to it: 403
TARGET_ANSWERS_PER_SECOND = 300.0  # the ingest target for single answers (bench/ingest.py)
PLACEHOLDER = "@@EXTERNAL-ID@@"
SINGLE_PATH = "/api/v1/answers"
BATCH_PATH = "/api/v1/answers/batch"
# Far enough back that most duplicates follow their original's response, near enough that some
# race it (a client retrying after a timeout does exactly that).
DUPLICATE_WINDOW = 2000


# ------------------------------------------------------------------------------ body pools


@dataclass(frozen=True, slots=True)
class Template:
    """An encoded answer with the place of its external_id cut out."""

    head: bytes
    tail: bytes
    text: str | None  # the answer text, to tell stored versions apart; None for invalid ones

    def body(self, external_id: str) -> bytes:
        return self.head + external_id.encode() + self.tail


def template(payload: dict[str, Any]) -> Template:
    body = ingest.encode(dict(payload, external_id=PLACEHOLDER))
    head, tail = body.split(PLACEHOLDER.encode())  # exactly one place, or this raises
    text = payload.get("answer")
    return Template(head, tail, text if isinstance(text, str) else None)


def _any_token(p: dict[str, Any], rng: Random) -> dict[str, Any]:
    return rng.choice(p["logprobs"]["content"])


def _missing_question(p: dict[str, Any], rng: Random) -> None:
    del p["question"]


def _positive_logprob(p: dict[str, Any], rng: Random) -> None:
    # A client that sends probabilities (or -logprob) instead of log-probabilities.
    _any_token(p, rng)["logprob"] = round(rng.uniform(0.01, 0.9), 6)


def _nonfinite_string(p: dict[str, Any], rng: Random) -> None:
    # Serialisers that write non-finite floats as strings.
    _any_token(p, rng)["logprob"] = rng.choice(["NaN", "-Infinity", "-inf"])


def _nonfinite_literal(p: dict[str, Any], rng: Random) -> None:
    # Python's json.dumps writes -Infinity and NaN, which are not JSON: the body is refused as a
    # whole, so only single posts get these (in a batch it would cost the valid items too).
    _any_token(p, rng)["logprob"] = rng.choice([float("-inf"), float("nan")])


def _unknown_use_case(p: dict[str, Any], rng: Random) -> None:
    # Well-formed slugs of no use case: refused like another tenant's (a malformed one is a
    # 400 of its own, "wrong type" covers that).
    p["use_case"] = rng.choice(["bnech", "bench-prod", "bench-hr"])


def _forbidden_use_case(p: dict[str, Any], rng: Random) -> None:
    p["use_case"] = OTHER_USE_CASE


def _wrong_type(p: dict[str, Any], rng: Random) -> None:
    mistake = rng.randrange(5)
    if mistake == 0:
        p["chunks"][0]["score"] = str(p["chunks"][0]["score"])
    elif mistake == 1:
        p["question"] = [p["question"]]
    elif mistake == 2:
        p["chunks"] = p["chunks"][0]
    elif mistake == 3:
        p["metadata"] = list(p["metadata"].items())
    else:
        p["logprobs"] = p["logprobs"]["content"]  # the list without its object


def _oversized_external_id(p: dict[str, Any], rng: Random) -> None:
    pass  # the content is valid; Planner gives these a 201-260 character external_id


# kind -> (mutation, expected status, allowed in batches)
INVALID_KINDS: dict[str, tuple[Callable[[dict[str, Any], Random], None], int, bool]] = {
    "missing question": (_missing_question, 400, True),
    "logprob > 0": (_positive_logprob, 400, True),
    "non-finite logprob string": (_nonfinite_string, 400, True),
    "non-finite logprob literal": (_nonfinite_literal, 400, False),
    "unknown use case": (_unknown_use_case, 403, True),  # reads as another tenant's
    "use case not allowed": (_forbidden_use_case, 403, True),
    "wrong type": (_wrong_type, 400, True),
    "oversized external_id": (_oversized_external_id, 400, True),
}


@dataclass
class Pools:
    valid: list[Template]
    invalid: dict[str, list[Template]]


def make_pools(answers: ingest.Answers, size: int, invalid_per_kind: int) -> Pools:
    """Distinct valid answers and, for each kind of mistake, some answers carrying it."""
    t0 = time.monotonic()
    payloads = answers.make("pool", size)
    valid = [template(p) for p in payloads]
    if len({t.text for t in valid}) != len(valid):
        raise ingest.BenchError("two pool answers have the same text; use another --seed")
    rng = answers.rng
    invalid = {}
    for kind, (mutate, _, _) in INVALID_KINDS.items():
        templates = []
        for _ in range(invalid_per_kind):
            p = copy.deepcopy(rng.choice(payloads))
            mutate(p, rng)
            templates.append(template(p))
        invalid[kind] = templates
    size_kib = sum(len(t.head) + len(t.tail) for t in valid) / len(valid) / 1024
    print(f"pool: {len(valid)} answers ({size_kib:.1f} KiB each) and {invalid_per_kind} of each "
          f"of {len(invalid)} kinds of mistakes encoded in {time.monotonic() - t0:.1f} s",
          flush=True)
    return Pools(valid, invalid)


# ---------------------------------------------------------------------------------- the plan


@dataclass(slots=True)
class Item:
    external_id: str
    kind: str  # "new", "duplicate", "changed" or one of INVALID_KINDS
    version: int  # index into Pools.valid, or into Pools.invalid[kind]

    @property
    def valid(self) -> bool:
        return self.kind in ("new", "duplicate", "changed")


@dataclass(slots=True)
class Request:
    batch: bool
    items: list[Item]

    def describe(self) -> str:
        kinds = Counter(i.kind for i in self.items)
        what = ", ".join(f"{n} {k}" for k, n in kinds.most_common())
        ids = ", ".join(i.external_id[:40] for i in self.items[:3])
        if self.batch:
            return f"batch of {len(self.items)} ({what}), first ids {ids}"
        return f"single {what} answer, id {ids}"


@dataclass
class Mix:
    batch_share: float  # of requests
    batch_min: int
    batch_max: int
    invalid_share: float  # of answers
    duplicate_share: float  # of answers
    changed_share: float  # of duplicates


class Planner:
    """Hands each client its next request; thread-safe, and cheap (bodies are spliced)."""

    def __init__(self, pools: Pools, mix: Mix, seed: int, run_id: str) -> None:
        self.pools = pools
        self.mix = mix
        self.rng = Random(seed)
        self.run_id = run_id
        self.lock = threading.Lock()
        self.count = 0
        self.history: deque[Item] = deque(maxlen=DUPLICATE_WINDOW)
        self.limit: int | None = None  # requests left, for the warm-up
        self.kinds = list(INVALID_KINDS)
        self.batch_kinds = [k for k, (_, _, in_batch) in INVALID_KINDS.items() if in_batch]

    def _item(self, batch: bool) -> Item:
        rng, mix = self.rng, self.mix
        self.count += 1
        roll = rng.random()
        if roll < mix.invalid_share:
            kind = rng.choice(self.batch_kinds if batch else self.kinds)
            external_id = f"{self.run_id}-bad-{self.count:08d}"
            if kind == "oversized external_id":
                external_id += "-" + "x" * rng.randint(200 - len(external_id), 250)
            return Item(external_id, kind, rng.randrange(len(self.pools.invalid[kind])))
        if roll < mix.invalid_share + mix.duplicate_share and self.history:
            original = rng.choice(self.history)
            if rng.random() < mix.changed_share:
                version = rng.randrange(len(self.pools.valid) - 1)
                version += version >= original.version  # any other content
                return Item(original.external_id, "changed", version)
            return Item(original.external_id, "duplicate", original.version)
        item = Item(f"{self.run_id}-{self.count:08d}", "new", rng.randrange(len(self.pools.valid)))
        self.history.append(item)
        return item

    def next(self) -> Request | None:
        with self.lock:
            if self.limit is not None:
                if self.limit <= 0:
                    return None
                self.limit -= 1
            batch = self.rng.random() < self.mix.batch_share
            n = self.rng.randint(self.mix.batch_min, self.mix.batch_max) if batch else 1
            return Request(batch, [self._item(batch) for _ in range(n)])

    def body(self, request: Request) -> bytes:
        parts = [
            (self.pools.valid[i.version] if i.valid else self.pools.invalid[i.kind][i.version])
            .body(i.external_id)
            for i in request.items
        ]
        if not request.batch:
            return parts[0]
        return b'{"answers":[' + b",".join(parts) + b"]}"


# ------------------------------------------------------------------------------------ clients


@dataclass(slots=True)
class Outcome:
    request: Request
    status: int  # 0: no response (refused, reset, timeout); the error text is the content
    latency_ms: float
    content: bytes
    done: float  # time.perf_counter() when the response was read


def run_clients(
    planner: Planner, url: str, key: str, clients: int, duration: float, read_timeout: float,
    meter: ingest.CpuMeter | None = None,
) -> tuple[float, list[Outcome], ingest.CpuUse | None, int]:
    """``clients`` threads, each with its own connection (http.client: little CPU per request),
    take requests from ``planner`` until ``duration`` is over or the planner has none left;
    requests in flight then finish. Returns the wall time, the outcomes, the CPU use and how
    many threads were still waiting for a response when the time ran out."""
    parts = urlsplit(url)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    outcomes: list[Outcome] = []  # list.append is atomic: no lock needed
    start = threading.Barrier(clients + 1)
    stop = threading.Event()
    t0 = 0.0

    def client() -> None:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                          timeout=read_timeout)
        start.wait()
        deadline = t0 + duration
        try:
            while not stop.is_set() and time.perf_counter() < deadline:
                request = planner.next()
                if request is None:
                    return
                body = planner.body(request)
                began = time.perf_counter()
                try:
                    # gunicorn's sync workers close after each response; http.client reconnects.
                    conn.request("POST", BATCH_PATH if request.batch else SINGLE_PATH,
                                 body=body, headers=headers)
                    response = conn.getresponse()
                    status, content = response.status, response.read()
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    status, content = 0, f"{type(e).__name__}: {e}".encode()
                done = time.perf_counter()
                outcomes.append(Outcome(request, status, (done - began) * 1000, content, done))
        finally:
            conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    if meter is not None:
        meter.start()
    t0 = time.perf_counter()
    start.wait(timeout=30)
    give_up = t0 + duration + read_timeout + 10
    try:
        for t in threads:
            t.join(max(0.0, give_up - time.perf_counter()))
    finally:
        stop.set()
    hung = sum(t.is_alive() for t in threads)
    seconds = max((o.done for o in outcomes), default=time.perf_counter()) - t0
    cpu = meter.stop() if meter is not None else None
    return seconds, list(outcomes), cpu, hung


# ------------------------------------------------------------------------------ bookkeeping


@dataclass(slots=True)
class Send:
    item: Item
    status: int  # the item's own status (a batch's status for each item if it failed whole)
    batch: bool


@dataclass
class Ledger:
    """Every item sent with the status it got, and what went wrong at the request level."""

    sends: list[Send] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)  # 5xx: what was sent, what came back
    transport_errors: list[str] = field(default_factory=list)
    rate_limited: int = 0  # requests answered 429
    unreadable: list[str] = field(default_factory=list)  # batch answers that did not add up

    def add(self, o: Outcome) -> None:
        r = o.request
        if o.status == 0:
            self.transport_errors.append(f"{r.describe()}: {o.content[:200]!r}")
        elif o.status >= 500:
            self.server_errors.append(f"{o.status} for {r.describe()}: {o.content[:300]!r}")
        elif o.status == 429:
            self.rate_limited += 1
        statuses = [o.status] * len(r.items)
        if r.batch and o.status == 200:
            try:
                results = orjson.loads(o.content)["results"]
                statuses = [int(x["status"]) for x in results]
                if [x["index"] for x in results] != list(range(len(r.items))):
                    raise ValueError("indexes out of order")
                for x in results:
                    if x["status"] >= 500:
                        self.server_errors.append(f"item status {x['status']} in "
                                                  f"{r.describe()}: {x}")
            except (ValueError, KeyError, TypeError) as e:
                self.unreadable.append(f"{r.describe()}: {e}: {o.content[:200]!r}")
                statuses = [-1] * len(r.items)
        self.sends += [Send(i, s, r.batch) for i, s in zip(r.items, statuses, strict=True)]


def _failed(status: int) -> bool:
    """No answer on the item's content: no response, a 5xx, rate limited, unreadable."""
    return status in (0, 429, -1) or status >= 500


@dataclass
class Stored:
    rows: int
    text: str
    chunks: int
    sampled: bool
    judge_runs: int


def fetch_stored(db_url: str, service_id: int) -> dict[str, list[Stored]]:
    with ingest.connect(db_url) as conn:
        has_runs = conn.execute("SELECT to_regclass('monitoring_judgerun')").fetchone()
        runs = ("(SELECT count(*) FROM monitoring_judgerun r WHERE r.answer_id = a.id)"
                if has_runs and has_runs[0] else "0")
        rows = conn.execute(
            "SELECT a.external_id, a.text, a.sampled, "
            "(SELECT count(*) FROM monitoring_chunk c WHERE c.answer_id = a.id), " + runs +
            " FROM monitoring_answer a WHERE a.service_id = %s", (service_id,)
        ).fetchall()
    out: dict[str, list[Stored]] = {}
    for external_id, text, sampled, chunks, judge_runs in rows:
        out.setdefault(external_id, []).append(Stored(1, text, chunks, sampled, judge_runs))
    return out


@dataclass
class Counts:
    valid_ids: int = 0
    stored: int = 0
    lost: int = 0
    rate_limited_only: int = 0  # valid ids whose every send got 429: not stored, not lost
    stored_twice: int = 0
    created_twice: int = 0  # 201 for more than one send of an external_id
    wrong_content: int = 0  # stored text is not the version acknowledged with 201
    bad_chunks: int = 0
    sampled: int = 0
    bad_judge_runs: int = 0
    never_sent: int = 0
    invalid_sent: int = 0
    invalid_rejected: int = 0
    invalid_wrong_status: int = 0
    invalid_stored: int = 0
    repeats: int = 0  # sends of the stored content after the one that stored it
    repeats_200: int = 0
    repeats_wrong: int = 0  # answered, but not 200
    raced: int = 0  # planned duplicates that arrived before their original (got the 201)
    other_content: int = 0  # sends with content other than the stored
    other_content_409: int = 0
    other_content_wrong: int = 0  # answered, but not 409
    changed_ids: int = 0  # external ids sent with more than one content
    changed_ids_kept: int = 0  # of these, stored with the content first acknowledged
    no_answer: int = 0  # item sends without an answer: transport error, 5xx, 429, unreadable
    examples: list[str] = field(default_factory=list)

    def example(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text)


def reconcile(ledger: Ledger, stored: dict[str, list[Stored]], pools: Pools) -> Counts:
    """Per external_id: one row, the content acknowledged with 201, and every other send
    answered as the contract says (200 for the same content, 409 for other content)."""
    c = Counts()
    by_id: dict[str, list[Send]] = {}
    for s in ledger.sends:
        if _failed(s.status):
            c.no_answer += 1
        if not s.item.valid:
            c.invalid_sent += 1
            expected = INVALID_KINDS[s.item.kind][1]
            if s.status == expected:
                c.invalid_rejected += 1
            elif not _failed(s.status):
                c.invalid_wrong_status += 1
                c.example(f"{s.item.kind} answered {s.status}, expected {expected} "
                          f"({'batch item' if s.batch else 'single'})")
            if s.item.external_id in stored:
                c.invalid_stored += 1
                c.example(f"{s.item.kind} stored: {s.item.external_id[:60]}")
            continue
        by_id.setdefault(s.item.external_id, []).append(s)

    sent_ids = set(by_id) | {s.item.external_id for s in ledger.sends if not s.item.valid}
    c.never_sent = sum(len(rows) for eid, rows in stored.items() if eid not in sent_ids)
    for external_id, sends in by_id.items():
        c.valid_ids += 1
        rows = stored.get(external_id, [])
        created = [s for s in sends if s.status == 201]
        if len(created) > 1:
            c.created_twice += 1
            c.example(f"{external_id}: 201 for {len(created)} sends")
        if not rows:
            if all(s.status == 429 for s in sends):
                c.rate_limited_only += 1
            else:
                c.lost += 1
                c.example(f"{external_id} not stored; statuses {[s.status for s in sends]}")
            continue
        c.stored += 1
        if len(rows) > 1:
            c.stored_twice += 1
        row = rows[0]
        if row.chunks != ingest.CHUNKS_PER_ANSWER:
            c.bad_chunks += 1
        c.sampled += row.sampled
        if row.judge_runs != (1 if row.sampled else 0):
            c.bad_judge_runs += 1
            c.example(f"{external_id}: {row.judge_runs} judge runs, sampled={row.sampled}")
        versions = {s.item.version for s in sends}
        kept = [v for v in versions if pools.valid[v].text == row.text]
        if len(kept) != 1:
            c.wrong_content += 1
            c.example(f"{external_id}: the stored text is none of the versions sent")
            continue
        kept_version = kept[0]
        if created and created[0].item.version != kept_version:
            c.wrong_content += 1
            c.example(f"{external_id}: stored text is not the content acknowledged with 201")
        if len(versions) > 1:
            c.changed_ids += 1
            c.changed_ids_kept += not (created and created[0].item.version != kept_version)
        creator = created[0] if created else None
        c.raced += creator is not None and creator.item.kind != "new"
        for s in sends:
            if s is creator:
                continue
            if s.item.version == kept_version:
                c.repeats += 1
                c.repeats_200 += s.status == 200
                if s.status != 200 and not _failed(s.status):
                    c.repeats_wrong += 1
                    c.example(f"{external_id}: same content answered {s.status}")
            else:
                c.other_content += 1
                c.other_content_409 += s.status == 409
                if s.status != 409 and not _failed(s.status):
                    c.other_content_wrong += 1
                    c.example(f"{external_id}: other content answered {s.status}")
    return c


# ------------------------------------------------------------------------------------ report


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


@dataclass
class Check:
    label: str
    ok: bool
    fails_run: bool  # a MISS here means something was lost, duplicated or broken


def report(
    args: argparse.Namespace, seconds: float, outcomes: Sequence[Outcome], ledger: Ledger,
    timed_from: int, c: Counts, cpu: ingest.CpuUse | None, hung: int,
) -> list[Check]:
    """Print the figures, the counts and the checks; the checks."""
    single = [o for o in outcomes if not o.request.batch]
    batch = [o for o in outcomes if o.request.batch]
    items = sum(len(o.request.items) for o in outcomes)
    created = sum(s.status == 201 for s in ledger.sends[timed_from:])
    per_s = (lambda n: n / seconds) if seconds > 0 else (lambda n: math.nan)
    lat_single = [o.latency_ms for o in single]
    lat_batch = [o.latency_ms for o in batch]
    batch_items = sum(len(o.request.items) for o in batch)
    print()
    print(f"timed run: {len(outcomes):,} requests ({len(single):,} single, {len(batch):,} "
          f"batches of {args.batch_min}-{args.batch_max}, {batch_items:,} answers in batches) "
          f"in {seconds:.1f} s from {args.clients} clients")
    print(f"  requests/s                  {_fmt(per_s(len(outcomes)))}")
    print(f"  answers/s (items sent)      {_fmt(per_s(items))}")
    print(f"  answers/s stored (201)      {_fmt(per_s(created))}")
    print(f"  single latency p50 / p99 ms {_fmt(percentile(lat_single, 50))} / "
          f"{_fmt(percentile(lat_single, 99))}")
    print(f"  batch latency p50 / p99 ms  {_fmt(percentile(lat_batch, 50))} / "
          f"{_fmt(percentile(lat_batch, 99))} (per batch)")
    if cpu is not None and seconds > 0:
        s = cpu.seconds
        print(f"  CPU cores busy: gunicorn {s['server'] / seconds:.2f}, postgres backends "
              f"{s['postgres'] / seconds:.2f}, this script (clients) {s['client'] / seconds:.2f}, "
              f"other processes {cpu.others / seconds:.2f} of {os.cpu_count()}")
        if items:
            ms = {group: value * 1000 / items for group, value in s.items()}
            print(f"  CPU ms per answer sent: gunicorn {ms['server']:.2f}, postgres "
                  f"{ms['postgres']:.2f}, clients {ms['client']:.2f}")
    statuses = Counter(o.status for o in outcomes)
    print("  request statuses: " + ", ".join(f"{k}: {v:,}" for k, v in sorted(statuses.items())))
    kinds = Counter(s.item.kind for s in ledger.sends)
    print("  answers sent (whole run, warm-up included): "
          + ", ".join(f"{k} {v:,}" for k, v in kinds.most_common()))

    print()
    print("counts (whole run, warm-up included)")
    rows = [
        ("valid answers sent (distinct external_id)", c.valid_ids),
        ("valid answers stored", c.stored),
        ("lost", c.lost),
        ("stored twice", c.stored_twice),
        ("created (201) twice", c.created_twice),
        ("stored content not the one acknowledged", c.wrong_content),
        ("stored without exactly 5 chunks", c.bad_chunks),
        ("sampled answers", c.sampled),
        ("answers with wrong number of judge runs", c.bad_judge_runs),
        ("rows never sent", c.never_sent),
        ("invalid sent", c.invalid_sent),
        ("invalid rejected with expected status", c.invalid_rejected),
        ("invalid answered otherwise", c.invalid_wrong_status),
        ("invalid stored", c.invalid_stored),
        ("repeats of stored content", c.repeats),
        ("repeats answered 200", c.repeats_200),
        ("repeats answered otherwise", c.repeats_wrong),
        ("duplicates that arrived first", c.raced),
        ("sends with other content", c.other_content),
        ("sends with other content answered 409", c.other_content_409),
        ("sends with other content answered otherwise", c.other_content_wrong),
        ("ids sent with changed content", c.changed_ids),
        ("ids that kept the first stored content", c.changed_ids_kept),
        ("5xx", len(ledger.server_errors)),
        ("transport errors", len(ledger.transport_errors)),
        ("unreadable batch answers", len(ledger.unreadable)),
        ("429 rate limited requests", ledger.rate_limited),
        ("valid ids only rate limited", c.rate_limited_only),
        ("clients still waiting at the end", hung),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {value:>9,}")

    rate = per_s(items)
    checks = [
        Check(f"every valid answer stored exactly once ({c.stored:,} of "
              f"{c.valid_ids - c.rate_limited_only:,}, {c.lost} lost, {c.stored_twice} twice, "
              f"{c.created_twice} created twice)",
              c.stored == c.valid_ids - c.rate_limited_only and not c.lost
              and not c.stored_twice and not c.created_twice, True),
        Check(f"stored rows are what was sent: content acknowledged with 201 "
              f"({c.wrong_content} differ), {ingest.CHUNKS_PER_ANSWER} chunks ({c.bad_chunks} "
              f"differ), one judge run per sampled answer ({c.bad_judge_runs} differ), no row "
              f"never sent ({c.never_sent})",
              not (c.wrong_content or c.bad_chunks or c.bad_judge_runs or c.never_sent), True),
        Check(f"every invalid answer rejected: 4xx single / per-item error in batches "
              f"({c.invalid_rejected:,} of {c.invalid_sent:,} as expected, "
              f"{c.invalid_wrong_status} otherwise, {c.invalid_stored} stored)",
              not c.invalid_wrong_status and not c.invalid_stored, True),
        Check(f"every repeat of stored content answered 200 ({c.repeats_200:,} of "
              f"{c.repeats:,}; {c.raced} duplicates arrived before their original)",
              not c.repeats_wrong, True),
        Check(f"other content for a stored external_id answered 409 and left the row as it "
              f"was ({c.other_content_409:,} of {c.other_content:,}; {c.changed_ids_kept:,} of "
              f"{c.changed_ids:,} ids kept their content)",
              not c.other_content_wrong and c.changed_ids_kept == c.changed_ids, True),
        Check(f"no 5xx ({len(ledger.server_errors)})", not ledger.server_errors, True),
        Check(f"every request answered ({len(ledger.transport_errors)} transport errors, "
              f"{len(ledger.unreadable)} unreadable batch answers, {hung} clients hung)",
              not ledger.transport_errors and not ledger.unreadable and not hung, True),
        Check(f"no 429 with TREUE_API_RATE_LIMIT={args.rate_limit} ({ledger.rate_limited} "
              f"requests, {c.rate_limited_only} valid ids not stored because of them)",
              not ledger.rate_limited, False),
        Check(f"answers/s >= {args.target:,.0f} ({_fmt(rate)}; the ingest target for single "
              f"answers, borrowed)", rate >= args.target, False),
    ]
    print()
    for check in checks:
        print(f"{'PASS' if check.ok else 'MISS'}  {check.label}")
    for problem in (c.examples + ledger.server_errors[:5] + ledger.transport_errors[:5]
                    + ledger.unreadable[:3]):
        print(f"  ! {problem}")
    return checks


# -------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients")
    parser.add_argument("--duration", type=float, default=60, help="seconds of load")
    parser.add_argument("--batch-share", type=float, default=0.2,
                        help="share of requests that are batches")
    parser.add_argument("--batch-min", type=int, default=10, help="fewest answers in a batch")
    parser.add_argument("--batch-max", type=int, default=50, help="most answers in a batch")
    parser.add_argument("--invalid-share", type=float, default=0.10,
                        help="share of answers with a client mistake")
    parser.add_argument("--duplicate-share", type=float, default=0.05,
                        help="share of answers that re-send an earlier external_id")
    parser.add_argument("--changed-share", type=float, default=0.2,
                        help="share of the duplicates whose content changed (409)")
    parser.add_argument("--pool", type=int, default=1000,
                        help="distinct answers encoded before the clock starts")
    parser.add_argument("--warmup", type=int, default=32,
                        help="requests before the clock starts (checked, not timed)")
    parser.add_argument("--target", type=float, default=TARGET_ANSWERS_PER_SECOND,
                        help="answers/s below which the throughput line is a MISS")
    parser.add_argument("--rate-limit", type=int, default=0,
                        help="TREUE_API_RATE_LIMIT for gunicorn (0: off)")
    parser.add_argument("--read-timeout", type=float, default=120,
                        help="seconds a client waits for a response")
    parser.add_argument("--flag-share", type=float, default=0.2,
                        help="share of answers tier 1 flags (as in bench/ingest.py)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=1, help="threads per gunicorn worker")
    parser.add_argument("--worker-class", default="sync", help="gunicorn worker class")
    parser.add_argument("--port", type=int, default=0, help="gunicorn port (0: a free one)")
    parser.add_argument("--broker-url", default="",
                        help="Celery broker for the judge tasks (default: the embedded SQLite "
                        "broker in a temporary directory, as bench/ingest.py)")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432",
                        help="PostgreSQL server URL, without the database")
    parser.add_argument("--db", default="treue_bench_load", help="name of the bench database")
    parser.add_argument("--replace", action="store_true",
                        help="drop the bench database first if it exists")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--seed", type=int, default=1, help="seed of answers and the mix")
    parser.add_argument("--time-limit", type=int, default=600,
                        help="seconds for the whole run; then it cleans up and fails")
    args = parser.parse_args(argv)
    if not 1 <= args.batch_min <= args.batch_max <= 500:
        parser.error("need 1 <= --batch-min <= --batch-max <= 500")
    for name in ("batch_share", "invalid_share", "duplicate_share", "changed_share"):
        if not 0 <= getattr(args, name) <= 1:
            parser.error(f"--{name.replace('_', '-')} must be between 0 and 1")
    if args.invalid_share + args.duplicate_share > 1:
        parser.error("--invalid-share + --duplicate-share must be at most 1")
    if args.clients < 1 or args.duration <= 0 or args.pool < 2:
        parser.error("need --clients >= 1, --duration > 0, --pool >= 2")
    if args.time_limit <= args.duration:
        parser.error("--time-limit must be longer than --duration")
    return args


def gunicorn_log_summary(server: ingest.Server) -> str:
    server.log.flush()
    server.log.seek(0)
    lines = server.log.read().decode(errors="replace").splitlines()
    enqueue = sum("could not enqueue" in line for line in lines)
    tracebacks = sum(line.startswith("Traceback") for line in lines)
    common = Counter(re.sub(r"\d+", "N", line)[:100] for line in lines).most_common(3)
    return (f"gunicorn log: {len(lines)} lines, {tracebacks} tracebacks, {enqueue} judge tasks "
            f"not enqueued (the reconciler re-sends those); most frequent: "
            + "; ".join(f"{n} x {line!r}" for line, n in common))


def run(args: argparse.Namespace) -> int:
    server: ingest.Server | None = None
    meter: ingest.CpuMeter | None = None
    created = False
    var_dir = tempfile.TemporaryDirectory(prefix="treue-load-")
    try:
        t0 = time.monotonic()
        ingest.create_database(args.pg, args.db, args.replace)
        created = True
        setup = ingest.prepare_database(args, var_dir.name)
        ingest.manage(setup.env, "create_use_case", OTHER_USE_CASE, "--name", "Not allowed")
        setup.env["TREUE_API_RATE_LIMIT"] = str(args.rate_limit)
        meter = ingest.CpuMeter(setup.db_url)
        print(f"code {ingest.git_state()}; database {args.db} ready in "
              f"{time.monotonic() - t0:.1f} s; load average {os.getloadavg()[0]:.2f} on "
              f"{os.cpu_count()} cores", flush=True)
        answers = ingest.Answers(args.seed, args.flag_share)
        pools = make_pools(answers, args.pool, invalid_per_kind=max(4, args.pool // 50))
        mix = Mix(args.batch_share, args.batch_min, args.batch_max, args.invalid_share,
                  args.duplicate_share, args.changed_share)
        planner = Planner(pools, mix, args.seed, answers.run_id)

        server = ingest.start_server(args, setup.env)
        meter.server_pid = server.proc.pid
        limit = "off" if args.rate_limit == 0 else f"{args.rate_limit} requests/min per key"
        print(f"gunicorn: {args.workers} workers x {args.threads} threads ({args.worker_class}) "
              f"on {server.url}; TREUE_API_RATE_LIMIT={args.rate_limit} (rate limiting {limit})",
              flush=True)

        ledger = Ledger()
        planner.limit = args.warmup
        _, warm, _, hung = run_clients(planner, server.url, setup.key, min(args.clients, 8),
                                       args.duration + 60, args.read_timeout)
        for o in warm:
            ledger.add(o)
        print(f"warm-up: {len(warm)} requests, statuses "
              f"{dict(sorted(Counter(o.status for o in warm).items()))}", flush=True)
        planner.limit = None

        print(f"load: {args.clients} clients for {args.duration:g} s ...", flush=True)
        seconds, outcomes, cpu, hung_timed = run_clients(
            planner, server.url, setup.key, args.clients, args.duration, args.read_timeout,
            meter,
        )
        timed_from = len(ledger.sends)
        for o in outcomes:
            ledger.add(o)
        server_log = gunicorn_log_summary(server)
        t1 = time.monotonic()
        counts = reconcile(ledger, fetch_stored(setup.db_url, setup.service_id), pools)
        print(f"checked {len(ledger.sends):,} answers sent against the database in "
              f"{time.monotonic() - t1:.1f} s", flush=True)
        checks = report(args, seconds, outcomes, ledger, timed_from, counts, cpu, hung + hung_timed)
        print(server_log)
        if ledger.server_errors or ledger.transport_errors or counts.examples:
            print(f"gunicorn log (last lines):\n{server.log_tail(30)}")
        return 1 if any(ch.fails_run and not ch.ok for ch in checks) else 0
    finally:
        ingest.clean_up(server=server, meter=meter, created=created, keep=args.keep,
                        pg=args.pg, db=args.db, var_dir=var_dir)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with ingest.signals_handled(args.time_limit):
            return run(args)
    except ingest.BenchError as e:
        print(f"error: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
    except (TimeoutError, subprocess.TimeoutExpired) as e:
        print(f"error: {e}; cleaned up", file=sys.stderr)
    return 1


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
