"""Judge benchmark: how fast the worker tier scores sampled answers, against the ideal.

It creates a throw-away PostgreSQL database, ingests N answers into a use case whose sample rate
is 1 (so every answer gets a judge run, enqueued on Redis), starts a local OpenAI-compatible
judge that answers every call after a fixed latency (default 200 ms; 3-8 claims per answer),
then starts W real `celery worker` processes and waits until every run has finished.

It prints wall time (first run started to last run finished), judge calls and tokens per answer,
answers per minute, and the ratio of the wall time to the ideal: total calls x latency divided by
the configured call concurrency (workers x TREUE_JUDGE_CONCURRENCY). Target: within 1.5x of the
ideal with 2 worker processes, and calls per answer = 1 + claims (no waste).

    .venv/bin/python bench/judge.py                        # 1000 answers, 2 workers
    .venv/bin/python bench/judge.py --answers 200 --latency 0.1 --workers 1

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and Redis on 127.0.0.1:6379; uses
Redis database 14 and flushes it. Cleans up (workers, database) on exit, also on Ctrl-C.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/statistics.py would
# shadow the standard library's statistics module (Django and this file import it).
_sys.path[0] = str(_Path(__file__).resolve().parents[1])

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PG = "postgres://postgres@127.0.0.1:5432"
BROKER = "redis://127.0.0.1:6379/14"
JUDGE_MODEL = "bench-judge"
TARGET_RATIO = 1.5


def claims_for(answer_id: str) -> list[str]:
    """3-8 distinct claims, fixed per answer."""
    n = 3 + int(hashlib.sha256(answer_id.encode()).hexdigest(), 16) % 6
    return [f"{answer_id}: Aussage {i}" for i in range(1, n + 1)]


class JudgeServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(self, latency: float) -> None:
        super().__init__(("127.0.0.1", 0), JudgeHandler)
        self.latency = latency
        self.lock = threading.Lock()
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0


class JudgeHandler(BaseHTTPRequestHandler):
    server: JudgeServer
    # Without it every reply waits ~40 ms for a delayed ACK, which the ratio would blame on us.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.calls += 1
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        time.sleep(self.server.latency)
        user = body["messages"][-1]["content"]
        match = re.search(r"BENCH-ANSWER-\d+", user)
        if "JSON" in body["messages"][0]["content"] and match:
            content = json.dumps(claims_for(match.group()), ensure_ascii=False)
        else:
            content = "GEDECKT"
        reply = json.dumps({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", JUDGE_MODEL),
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(content) // 4,
                      "total_tokens": (len(user) + len(content)) // 4},
        }).encode()
        with self.server.lock:
            self.server.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per judge call")
    parser.add_argument("--workers", type=int, default=2, help="celery worker processes")
    parser.add_argument("--threads", type=int, default=8, help="tasks in flight per worker")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="TREUE_JUDGE_CONCURRENCY: judge calls in flight per worker")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--db", default="treue_bench_judge")
    args = parser.parse_args()

    import psycopg
    import redis

    server = JudgeServer(args.latency)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "DATABASE_URL": f"{PG}/{args.db}",
        "CELERY_BROKER_URL": BROKER,
        "DEBUG": "False",
        "SECRET_KEY": "bench-not-secret",
        "LOG_LEVEL": "WARNING",
        "TREUE_JUDGE_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "TREUE_JUDGE_API_KEY": "bench",
        "TREUE_JUDGE_MODEL": JUDGE_MODEL,
        "TREUE_JUDGE_CONCURRENCY": str(args.concurrency),
    }
    os.environ.update(env)
    redis.Redis.from_url(BROKER).flushdb()
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db}"')
    workers: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                       check=True)
        return run(args, server, env, workers)
    finally:
        for w in workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(w.pid, signal.SIGKILL)
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        redis.Redis.from_url(BROKER).flushdb()
        server.shutdown()


def run(args: argparse.Namespace, server: JudgeServer, env: dict[str, str],
        workers: list[subprocess.Popen[bytes]]) -> int:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "treue_site.settings")
    django.setup()
    from django.db.models import Max, Min, Sum

    from monitoring import services
    from monitoring.models import JudgeRun

    use_case = services.use_case_create(slug="bench", name="Bench", sample_rate=1.0)
    service, _ = services.service_create(name="bench", use_cases=[use_case])
    bodies = [
        {
            "external_id": f"b-{i}",
            "use_case": "bench",
            "question": f"Frage {i}: Wie oft wird geprüft?",
            "answer": f"BENCH-ANSWER-{i} Der Behälter wird alle {i % 9 + 1} Jahre geprüft.",
            "model": "bench-generator",
            "chunks": [{"text": f"Abschnitt {k} zu Frage {i}: Prüfintervall.", "score": 0.8}
                       for k in range(5)],
        }
        for i in range(args.answers)
    ]
    for start in range(0, len(bodies), 500):
        services.answer_ingest_batch(service=service, items=bodies[start:start + 500])
    total = JudgeRun.objects.count()
    print(f"{total} judge runs enqueued; starting {args.workers} worker(s) "
          f"x {args.threads} threads, {args.concurrency} judge calls each", flush=True)

    for n in range(args.workers):
        workers.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "treue_site", "worker", "--pool", "threads",
             "--concurrency", str(args.threads), "--loglevel", "WARNING", "-n", f"bench{n}@%h",
             "--without-mingle", "--without-gossip", "--without-heartbeat"],
            cwd=ROOT, env=env, start_new_session=True,
        ))
    deadline = time.monotonic() + args.timeout
    done = 0
    while time.monotonic() < deadline:
        done = JudgeRun.objects.filter(status__in=["succeeded", "failed"]).count()
        if done == total:
            break
        time.sleep(1)
    runs = JudgeRun.objects.filter(status="succeeded")
    agg = runs.aggregate(
        first=Min("started_at"), last=Max("finished_at"), calls=Sum("calls"),
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"),
    )
    ok = runs.count()
    failed = JudgeRun.objects.filter(status="failed").count()
    if not ok:
        print(f"no run succeeded ({done}/{total} finished, {failed} failed)")
        return 1
    wall = (agg["last"] - agg["first"]).total_seconds()
    claims = sum(len(claims_for(f"BENCH-ANSWER-{i}")) for i in range(args.answers))
    ideal = agg["calls"] * args.latency / (args.workers * args.concurrency)
    ratio = wall / ideal
    print()
    print(f"answers scored        {ok} of {total} ({failed} failed)")
    print(f"wall time             {wall:.1f} s (first start to last finish)")
    print(f"answers/min           {ok / wall * 60:.0f}")
    print(f"judge calls           {agg['calls']} ({agg['calls'] / ok:.2f}/answer; "
          f"1 + claims = {(total + claims) / total:.2f}); server saw {server.calls}")
    print(f"tokens per answer     {agg['prompt'] / ok:.0f} prompt, "
          f"{agg['completion'] / ok:.0f} completion")
    print(f"calls in flight       max {server.max_in_flight} "
          f"(configured {args.workers} x {args.concurrency})")
    print(f"ideal                 {ideal:.1f} s = calls x {args.latency * 1000:.0f} ms / "
          f"{args.workers * args.concurrency}")
    verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
    print(f"wall / ideal          {ratio:.2f} (target <= {TARGET_RATIO}) {verdict}")
    waste = agg["calls"] - (total + claims)
    print(f"wasted calls          {waste} {'PASS' if waste == 0 else 'MISS'}")
    return 0 if done == total else 1


if __name__ == "__main__":
    sys.exit(main())
