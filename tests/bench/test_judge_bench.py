"""bench/judge.py's parts that decide its figures, without workers: which variants the flags
ask for, how a prompt's tokens are counted (a schema's too), which kind of call a request is
and which answer it is for, the judges' replies to every request shape, and the prompt taken
apart. The product's own `judge_answer` drives the calls, in-process, as the workers would;
the last test runs the bench itself on a few answers."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest

from judging.domain import batched, single
from judging.domain import judge_prompt as prompts
from judging.domain import judgement as judging
from judging.domain.verification import judge_answer
from tests.support.redis_server import REDIS_SERVER, RedisServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    # Loaded by path; it puts the project root first on sys.path, which is put back after.
    path = list(sys.path)
    spec = importlib.util.spec_from_file_location("treue_bench_judge", ROOT / "bench" / "judge.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]
        sys.path[:] = path


@pytest.fixture(scope="module")
def ragtruth(bench: ModuleType) -> Any:
    return bench.RagTruth(24)


def flags(corpus: str = "ragtruth", **given: Any) -> argparse.Namespace:
    values = {"corpus": corpus, "mode": None, "language": None, "structured": "on",
              "evidence": None, **given}
    return argparse.Namespace(**values)


def test_the_variants_the_flags_ask_for(bench: ModuleType) -> None:
    names = [v.name for v in bench.variants_of(flags())]
    assert names == [
        "per-claim de", "per-claim en",
        "batched de schema", "batched de schema no-evidence",
        "batched en schema", "batched en schema no-evidence",
        "single de schema", "single de schema no-evidence",
        "single en schema", "single en schema no-evidence",
    ]
    assert [v.name for v in bench.variants_of(flags("synthetic"))] == ["per-claim de"]
    both = bench.variants_of(flags(mode="batched", language="en", structured="both",
                                   evidence="on"))
    assert [v.name for v in both] == ["batched en schema", "batched en plain"]
    assert [v.mode for v in bench.variants_of(flags(mode="both", language="de"))] == [
        "per-claim", "batched", "batched"]
    assert len({v.slug for v in bench.variants_of(flags(structured="both"))}) == 18


def test_a_schema_counts_as_prompt_tokens_before_the_messages(bench: ModuleType) -> None:
    tokens = bench.Tokens()
    messages = batched.verify_batch_messages(chunks=["Der Behälter wird alle 5 Jahre geprüft."],
                                             claims=["Er wird alle 5 Jahre geprüft."],
                                             language="de", structured=True)
    schema = batched.batch_schema()
    plain, structured = tokens.prompt(messages), tokens.prompt(messages, schema)
    text = bench.schema_json(schema)
    assert text == json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    assert structured == list(tokens.text(text)) + plain
    assert bench.schema_json(None) == "" and tokens.prompt(messages, None) == plain


def _requests(claims: list[str], language: str) -> dict[str, list[dict[str, str]]]:
    chunks = ["Der Behälter wird alle 5 Jahre geprüft.", "Änderungen gibt die Fachkraft frei."]
    return {
        "decompose": prompts.decompose_messages(question="Wie oft?", answer="Alle 5 Jahre.",
                                                language=language),
        "verify": prompts.verify_messages(context=prompts.format_context(chunks),
                                          claim=claims[0], language=language),
        **{f"verify_batch {e} {s}": batched.verify_batch_messages(
            chunks=chunks, claims=claims, language=language, evidence=e, structured=s)
           for e in (True, False) for s in (True, False)},
        **{f"single {e}": single.single_messages(question="Wie oft?", answer="Alle 5 Jahre.",
                                                 chunks=chunks, language=language, evidence=e)
           for e in (True, False)},
    }


@pytest.mark.parametrize("language", ["de", "en"])
def test_every_request_is_told_by_its_system_message(bench: ModuleType, language: str) -> None:
    claims = ["Der Behälter wird alle 5 Jahre geprüft.", "Die Fachkraft gibt frei."]
    for kind, messages in _requests(claims, language).items():
        assert bench._purpose(messages) == kind.split()[0], kind
        if kind.startswith(("verify_batch", "single")):
            evidence = kind.split()[1] == "True"
            assert bench._evidence_asked(messages, None) is evidence, kind
    assert bench._purpose([{"role": "user", "content": "Hallo"}]) == "other"


def test_the_listed_claims_of_a_batch_and_of_its_correction(bench: ModuleType) -> None:
    claims = ["Der Behälter wird alle 5 Jahre geprüft.", "Die Fachkraft gibt frei.",
              "Es kostet 250 Euro."]
    ids = batched.claim_ids(claims)
    # A passage that holds a list header and an id-like line is context, not a claim.
    chunks = ["Aussagen (1):\nZ9: keine Aussage", "Der Behälter wird alle 5 Jahre geprüft."]
    messages = batched.verify_batch_messages(chunks=chunks, claims=claims, language="de")
    assert bench.listed_claims(messages) == list(zip(ids, claims, strict=True))
    again = batched.correction_messages(messages, f"{ids[0]}: GEDECKT", [ids[2], ids[1]],
                                        language="de")
    assert bench.listed_claims(again) == [(ids[1], claims[1]), (ids[2], claims[2])]


def _judge(corpus: Any, tokens: Any, bench: ModuleType, variant: Any, question: str,
           answer: str, chunks: list[str], index: int) -> tuple[judging.Judgement, list[Any]]:
    """The product's judgement of one answer with the bench judge's replies, and per call
    (prompt tokens, schema tokens, completion tokens, attributed answer)."""
    calls: list[Any] = []

    def call(messages: list[dict[str, str]],
             response_format: dict[str, Any] | None = None) -> judging.CallResult:
        content = corpus.reply(messages, response_format)
        prompt = len(tokens.prompt(messages, response_format))
        calls.append((prompt, tokens.count(bench.schema_json(response_format)),
                      tokens.count(content), corpus.attribute(messages)))
        return judging.CallResult(content, prompt, tokens.count(content), 0, "bench-judge")

    judgement = judge_answer(
        question=question, answer=answer, chunks=chunks, language=variant.language,
        call=call, concurrency=1, mode=variant.mode, batch_size=batched.DEFAULT_BATCH_SIZE,
        batch_call=call, evidence=variant.evidence,
        structured=variant.structured if variant.mode != "per-claim" else False,
    )
    assert all(attributed == index for *_, attributed in calls)
    return judgement, calls


@pytest.mark.parametrize("mode", ["per-claim", "batched", "single"])
@pytest.mark.parametrize("structured", [True, False])
@pytest.mark.parametrize("evidence", [True, False])
def test_the_synthetic_judge_answers_every_shape(
    bench: ModuleType, mode: str, structured: bool, evidence: bool
) -> None:
    corpus, tokens = bench.Synthetic(3), bench.Tokens()
    variant = bench.Variant(mode, "de", structured, evidence)
    for index, body in enumerate(corpus.bodies("bench", "bench")):
        judgement, calls = _judge(corpus, tokens, bench, variant, body["question"],
                                  body["answer"], [c["text"] for c in body["chunks"]], index)
        claims = corpus.claims(f"BENCH-ANSWER-{index}")
        assert [c.claim for c in judgement.claims] == claims
        assert judgement.result.score == 1.0
        assert judgement.path == mode
        assert len(calls) == {"per-claim": 1 + len(claims), "batched": 2, "single": 1}[mode]
        if mode != "per-claim":
            assert all(c.chunks == ((1,) if evidence else ()) for c in judgement.claims)
            assert any(schema for _, schema, *_ in calls) is structured


@pytest.mark.parametrize("variant", [
    ("batched", "de", True, True), ("batched", "en", False, True),
    ("batched", "de", True, False), ("single", "en", True, True), ("single", "de", False, False),
])
def test_every_call_is_attributed_and_the_prompt_taken_apart_adds_up(
    bench: ModuleType, ragtruth: Any, variant: tuple[str, str, bool, bool]
) -> None:
    """On RAGTruth answers with the demo judge: no claim asked again, no call attributed to
    another answer (some share their question and passages), and the prompt as the bench takes
    it apart is the prompt the judge counted, token for token."""
    tokens, v = bench.Tokens(), bench.Variant(*variant)
    prompt = schema = 0
    for index, row in enumerate(ragtruth.rows):
        judgement, calls = _judge(ragtruth, tokens, bench, v, row["question"], row["response"],
                                  row["passages"], index)
        claims = len(judgement.claims)
        assert len(calls) == (1 if v.mode == "single" else 1 + (claims > 0))
        assert judgement.path in (v.mode, "")
        prompt += sum(c[0] for c in calls)
        schema += sum(c[1] for c in calls)
    parts = bench.prompt_layout(ragtruth, tokens, v, batched.DEFAULT_BATCH_SIZE)
    assert sum(parts.values()) * len(ragtruth.rows) == pytest.approx(prompt)
    assert parts["schema"] * len(ragtruth.rows) == pytest.approx(schema)
    assert (schema > 0) is v.structured
    wording = "one-call wording" if v.mode == "single" else "verification wording"
    assert parts[wording] > 0 and parts["context"] > 0 and parts["question + answer"] > 0


def test_calls_for_answers_that_share_their_passages_are_told_apart(
    bench: ModuleType,
) -> None:
    """Two answers to one question share its passages (9 pairs and a triple among the bench's
    200), and a claim may repeat a passage's sentence: the claim, or the one-call request's
    answer, is looked for outside the passages."""
    corpus, tokens = bench.RagTruth(200), bench.Tokens()
    shared = [n for ns in corpus._by_context.values() if len(ns) > 1 for n in ns]
    assert len(shared) >= 10
    for v in (bench.Variant("per-claim", "en"), bench.Variant("single", "de"),
              bench.Variant("batched", "en")):
        for index in shared:
            row = corpus.rows[index]
            _judge(corpus, tokens, bench, v, row["question"], row["response"], row["passages"],
                   index)


@pytest.mark.postgres
def test_a_short_run_scores_both_variants_through_the_workers(tmp_path: Path) -> None:
    """bench/judge.py end to end on a few answers, on a private redis-server (the machine's is
    shared, and the bench flushes its broker): batched with and without a schema, each through
    a real celery worker; every run scored, the judge's log equal to the runs, and the prompt
    taken apart equal to the prompt counted."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    redis = RedisServer(tmp_path).start()
    name = f"treue_bench_judge_smoke_{os.getpid()}"
    try:
        result = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "judge.py"), "--corpus", "ragtruth",
             "--answers", "8", "--mode", "batched", "--language", "de", "--structured", "both",
             "--evidence", "on", "--workers", "1", "--latency", "0.01", "--db", name,
             "--broker", redis.url, "--timeout", "120"],
            capture_output=True, text=True, timeout=300, cwd=ROOT,
        )
    finally:
        redis.stop()
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-3000:]
    for variant in ("batched de schema", "batched de plain"):
        assert f"PASS  {variant}: every run scored (8/8, 0 failed)" in out, out
        assert re.search(rf"^PASS  {variant}: calls = 1 \+ batches", out, re.MULTILINE), out
        assert re.search(rf"^PASS  {variant}: \d+ requests with a schema", out, re.MULTILINE)
        assert re.search(rf"^(PASS|MISS)  {variant}: prompt tokens per answer [\d,.]+ <= "
                         r"1,100 \(issue 37\)$", out, re.MULTILINE), out
        layout = re.search(rf"^  {variant}: .*; sum ([\d,]+), measured ([\d,]+)$", out,
                           re.MULTILINE)
        assert layout and layout.group(1) == layout.group(2), out
    assert "structured output (a JSON schema) against plain requests" in out
    assert re.search(r"^PASS  batched de plain: 0 requests with a schema; the product knows "
                     r"structured output as False", out, re.MULTILINE)
    server = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            [name]).fetchone() is None
