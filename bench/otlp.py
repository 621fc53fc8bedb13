"""OpenTelemetry receiver benchmark: what one export request costs, and whether a flood delays
another sender's trace (issue 36).

On a throw-away PostgreSQL database and a real gunicorn (one sync worker, so that its CPU is the
request's, and the --timeout of docs/operations.md), it posts, one request each:

* ``flood``: N single-span traces (default 10,000), each a CHAIN span, so that each is held as a
  trace of its own: the attack of issue 36 (22 s, 8 s of web CPU before). gzip-compressed
  protobuf, then the same as OTLP/JSON. Target: <= 3 s of web CPU for the protobuf request.
* ``max-spans``: traces.decoding.MAX_SPANS such traces: the most spans a request may hold.
* ``max-values``: MAX_SPANS RAG spans (RETRIEVER, four spans a trace) carrying nearly
  MAX_VALUES attribute values, about 60 MiB: the most work an accepted protobuf body can ask for.
* ``max-bytes``: 1,000 RAG spans of 60 KiB of document text each (about 60 MiB).
* ``over``: MAX_SPANS + 1 spans: refused with 413 before any work.

Each prints the wall time, the CPU seconds of gunicorn and of the PostgreSQL backend, and the
body's size. The largest requests must end well inside gunicorn's timeout (half of it).

Then ``fairness``: with the floods' traces all due (TREUE_OTLP_QUIET_SECONDS=0), another service
sends one RAG trace; sweeps (traces.services.otlp_traces_assemble_due, 200 traces each, as beat
runs them every 10 s) run until it is assembled. Target: the first sweep. It also prints how
long the sweep's choice of traces takes with the backlog, and how long a sweep assembles.

    .venv/bin/python bench/otlp.py                    # about 3 minutes here
    .venv/bin/python bench/otlp.py --spans 2000 --phases flood,over,fairness

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust; --pg for another server). It creates
the database (default treue_bench_otlp; --replace drops an existing one), migrates it, creates
the use cases and keys with the management commands, and drops it at the end (--keep keeps it).
Exit status 0 when every request was answered as expected, 1 otherwise; --strict also exits 2
on a missed target.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/statistics.py would
# shadow the standard library's statistics module (Django and this file import it).
_sys.path[0] = str(_Path(__file__).resolve().parents[1])

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
from bench import ingest  # bench/ingest.py: the ingest bench's setup and helpers
from tests.traces.otlp import rag_spans, request, span, to_json, trace_id
from traces.decoding import MAX_SPANS, MAX_VALUES

PHASES = ("flood", "max-spans", "max-values", "max-bytes", "over", "fairness")
TARGET_FLOOD_CPU = 3.0  # seconds of web CPU for the protobuf flood of 10,000 traces
# docs/operations.md: gunicorn treue_site.wsgi ... --timeout 60 (bench/ingest.py starts it so).
GUNICORN_TIMEOUT = 60.0
FLOOD_USE_CASE, OTHER_USE_CASE = "flood", "other"
URL_PATH = "/api/v1/otlp/v1/traces"
PROTOBUF, JSON = "application/x-protobuf", "application/json"


@dataclass
class Result:
    name: str
    spans: int
    body_bytes: int
    status: int
    expected: int
    wall: float
    web_cpu: float
    pg_cpu: float
    target: str = ""
    met: bool | None = None

    @property
    def ok(self) -> bool:
        return self.status == self.expected


def single_span_traces(n: int, first: int) -> list[Any]:
    return [span(trace_id(first + i), 1, name="rag",
                 attrs={"openinference.span.kind": "CHAIN", "input.value": "Frage?"})
            for i in range(n)]


def value_heavy_spans(first: int) -> list[Any]:
    """MAX_SPANS retriever spans, four a trace, holding nearly MAX_VALUES attribute values."""
    per_span = MAX_VALUES // MAX_SPANS - 2  # and the span kind, and the resource's name
    text = "x" * 16  # the body stays under TREUE_OTLP_MAX_BODY_BYTES (64 MiB)
    attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
    for i in range(per_span):
        attrs[f"retrieval.documents.{i}.document.content"] = text
    return [span(trace_id(first + i // 4), i % 4 + 1, parent=None if i % 4 == 0 else 1,
                 attrs=attrs) for i in range(MAX_SPANS)]


def byte_heavy_spans(first: int, n: int = 1000, text_bytes: int = 60 * 1024) -> list[Any]:
    text = ("Prüfintervall: 5 Jahre für Behälter über 1.000 Liter. " * (text_bytes // 55 + 1))
    attrs = {"openinference.span.kind": "RETRIEVER",
             "retrieval.documents.0.document.content": text[:text_bytes]}
    return [span(trace_id(first + i), 1, attrs=attrs) for i in range(n)]


def post(name: str, url: str, key: str, spans: list[Any], meter: ingest.CpuMeter, *,
         media: str = PROTOBUF, expected: int = 200) -> Result:
    message = request(spans)
    raw = message.SerializeToString() if media == PROTOBUF else to_json(message)
    body = gzip.compress(raw, compresslevel=6)
    headers = {"Content-Type": media, "Content-Encoding": "gzip",
               "Authorization": f"Bearer {key}"}
    meter.start()
    started = time.monotonic()
    response = httpx.post(url + URL_PATH, content=body, headers=headers,
                          timeout=GUNICORN_TIMEOUT * 2)
    wall = time.monotonic() - started
    cpu = meter.stop()
    result = Result(name, len(spans), len(raw), response.status_code, expected, wall,
                    cpu.seconds.get("server", 0.0), cpu.seconds.get("postgres", 0.0))
    if response.status_code != expected:
        print(f"  ! {name}: {response.status_code} {response.content[:300]!r}", flush=True)
    elif response.status_code == 200 and response.content not in (b"", b"{}"):
        print(f"  ! {name}: partial success {response.content[:300]!r}", flush=True)
        result.status = -1
    return result


def print_result(r: Result) -> None:
    verdict = "" if r.met is None else ("PASS" if r.met else "MISS")
    print(f"{r.name:<22} {r.spans:>7,} {r.body_bytes / 2**20:>8.1f} {r.status:>6} "
          f"{r.wall:>7.2f} {r.web_cpu:>8.2f} {r.pg_cpu:>7.2f}  {r.target} {verdict}", flush=True)


SWEEPS = """
import json, time
from traces import services
from traces.models import OtlpTrace
other = {other!r}
t = time.monotonic(); due = services.otlp_traces_due(); choose = time.monotonic() - t
print(json.dumps({{"due_query_s": choose, "backlog": OtlpTrace.objects.filter(
    status="pending").count()}}), flush=True)
for sweep in range(1, {sweeps} + 1):
    t = time.monotonic(); cpu = time.process_time()
    done = services.otlp_traces_assemble_due()
    row = OtlpTrace.objects.get(trace_id=other)
    print(json.dumps({{"sweep": sweep, "assembled": done, "wall_s": time.monotonic() - t,
                      "cpu_s": time.process_time() - cpu, "other": row.status}}), flush=True)
    if row.status == "done":
        break
"""


def fairness(setup_env: dict[str, str], other_trace: str, sweeps: int) -> tuple[bool, list[str]]:
    code = SWEEPS.format(other=other_trace, sweeps=sweeps)
    out = ingest.manage(setup_env, "shell", "-c", code, timeout=600)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    lines = []
    head, *runs = rows
    lines.append(f"backlog {head['backlog']:,} traces due; choosing a sweep's 200 took "
                 f"{head['due_query_s'] * 1000:.0f} ms")
    for r in runs:
        lines.append(f"sweep {r['sweep']}: {r['assembled']} traces in {r['wall_s']:.1f} s "
                     f"({r['cpu_s']:.1f} s CPU of the sweep); the other sender's trace: "
                     f"{r['other']}")
    return bool(runs) and runs[0]["other"] == "done", lines


def run(args: argparse.Namespace) -> int:
    server: ingest.Server | None = None
    meter: ingest.CpuMeter | None = None
    created = False
    var_dir = tempfile.TemporaryDirectory(prefix="treue-bench-otlp-")
    results: list[Result] = []
    try:
        ingest.create_database(args.pg, args.db, args.replace)
        created = True
        db_url = f"{args.pg}/{args.db}"
        env = dict(os.environ, DATABASE_URL=db_url, DEBUG="False", SECRET_KEY="x" * 50,
                   ALLOWED_HOSTS="127.0.0.1,localhost", SECURE_SSL_REDIRECT="False",
                   LOG_LEVEL="WARNING", DJANGO_SETTINGS_MODULE="treue_site.settings",
                   TREUE_VAR_DIR=var_dir.name,
                   CELERY_BROKER_URL=f"sqla+sqlite:///{var_dir.name}/broker.sqlite3",
                   TREUE_API_RATE_LIMIT="0", TREUE_OTLP_QUIET_SECONDS="0")
        ingest.manage(env, "migrate", "--noinput")
        keys = {}
        for slug in (FLOOD_USE_CASE, OTHER_USE_CASE):
            ingest.manage(env, "create_use_case", slug, "--name", slug.title())
            out = ingest.manage(env, "create_service", f"{slug}-bot", "--use-case", slug)
            keys[slug] = out.strip().splitlines()[-1]
        meter = ingest.CpuMeter(db_url)
        server = ingest.start_server(argparse.Namespace(
            port=None, workers=1, threads=1, worker_class="sync"), env)
        meter.server_pid = server.proc.pid
        print(f"code {ingest.git_state()}; load average {os.getloadavg()[0]:.2f} on "
              f"{os.cpu_count()} cores; CPU reference {ingest.cpu_reference():.1f} ms (lower is "
              f"a faster moment); gunicorn: 1 sync worker, --timeout {GUNICORN_TIMEOUT:.0f}",
              flush=True)
        key = keys[FLOOD_USE_CASE]
        url = server.url
        post("warm-up", url, key, single_span_traces(10, 10**9), meter)
        print(f"{'request':<22} {'spans':>7} {'MiB':>8} {'status':>6} {'wall s':>7} "
              f"{'web CPU':>8} {'PG CPU':>7}  target", flush=True)
        first = 1
        half = GUNICORN_TIMEOUT / 2
        if "flood" in args.phases:
            r = post("flood, protobuf", url, key, single_span_traces(args.spans, first), meter)
            r.target, r.met = f"web CPU <= {TARGET_FLOOD_CPU:.0f} s", r.web_cpu <= (
                TARGET_FLOOD_CPU)
            first += args.spans
            results.append(r)
            print_result(r)
            r = post("flood, JSON", url, key, single_span_traces(args.spans, first), meter,
                     media=JSON)
            first += args.spans
            results.append(r)
            print_result(r)
        for phase, make in (
            ("max-spans", lambda f: single_span_traces(MAX_SPANS, f)),
            ("max-values", value_heavy_spans),
            ("max-bytes", byte_heavy_spans),
        ):
            if phase in args.phases:
                spans = make(first)
                first += len(spans)
                r = post(phase, url, key, spans, meter)
                r.target, r.met = f"wall <= {half:.0f} s", r.wall <= half
                results.append(r)
                print_result(r)
                del spans
        if "over" in args.phases:
            r = post("over", url, key, single_span_traces(MAX_SPANS + 1, first), meter,
                     expected=413)
            results.append(r)
            print_result(r)
        ok = all(r.ok for r in results)
        fair = None
        if "fairness" in args.phases:
            other = trace_id(10**12)
            r = post("other sender's trace", url, keys[OTHER_USE_CASE], rag_spans(other), meter)
            print_result(r)
            ok = ok and r.ok
            fair, lines = fairness(env, other, args.sweeps)
            for line in lines:
                print(f"  {line}")
            print(f"fairness: the other sender's trace in the first sweep: "
                  f"{'PASS' if fair else 'MISS'}", flush=True)
        if tail := server.log_tail(10):
            print(f"gunicorn log (last lines):\n{tail}")
        met = all(r.met is not False for r in results) and fair is not False
        if not ok:
            return 1
        return 2 if args.strict and not met else 0
    finally:
        ingest.clean_up(server=server, meter=meter, created=created, keep=args.keep,
                        pg=args.pg, db=args.db, var_dir=var_dir)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=10_000,
                        help="single-span traces of the flood request")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated, of {', '.join(PHASES)}")
    parser.add_argument("--sweeps", type=int, default=5, help="sweeps at most in fairness")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--db", default="treue_bench_otlp")
    parser.add_argument("--replace", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--time-limit", type=int, default=1200)
    parser.add_argument("--strict", action="store_true", help="exit 2 when a target is missed")
    args = parser.parse_args(argv)
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if unknown := set(args.phases) - set(PHASES):
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", args.db):
        parser.error("--db must be a plain lower-case PostgreSQL name")
    if not 1 <= args.spans <= MAX_SPANS:
        parser.error(f"--spans must be 1..{MAX_SPANS}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with ingest.signals_handled(args.time_limit):
            return run(args)
    except (ingest.BenchError, subprocess.SubprocessError, httpx.HTTPError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
