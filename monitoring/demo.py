"""Demo data: real RAG answers (RAGTruth QA, MIT licence) turned into ingest requests.

RAGTruth carries human hallucination labels but no log-probabilities. The demo invents them,
deterministically: content-bearing tokens inside a labelled span often get a low probability,
others rarely do — so the demo's tier 1 behaves like a useful (imperfect) trigger. They are
marked as synthetic in each answer's metadata.

Each answer also carries the chat messages that produced it (``demo_messages``: a system prompt
and RAGTruth's QA prompt with the passages and the question), as a RAG service would send them,
so that a self-consistency investigation can re-ask them. In the demo, the generator it re-asks
is ``monitoring.demo_judge``, which replays these answers with scripted variation.
"""

import json
import math
import random
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# The model name the demo judge answers as. Its verdicts are replayed human labels, not a model's
# judgement, and the pages say so wherever a run of this "model" is shown.
DEMO_JUDGE_MODEL = "treue-demo-judge"
SAMPLE_FILE = Path(__file__).resolve().parent.parent / "demo" / "ragtruth_sample.jsonl"
TOKEN_RE = re.compile(r"\s*(?:[^\W\d_]{1,7}|\d{1,3}|[^\w\s])|\s+")
WORD_RE = re.compile(r"\w+")


def _tokens(text: str) -> list[tuple[int, str]]:
    """BPE-like pieces with their start offsets; they spell `text` exactly."""
    pieces = [(m.start(), m.group()) for m in TOKEN_RE.finditer(text)]
    if "".join(p for _, p in pieces) != text:  # characters the pattern misses, e.g. "_"
        return [(0, text)]
    return pieces


def _logprobs(text: str, labels: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    spans = [(label["start"], label["end"]) for label in labels]
    content = []
    for start, token in _tokens(text):
        stripped = token.strip()
        bearing = stripped[:1].isdigit() or stripped[:1].isupper()
        invented = any(s <= start < e for s, e in spans)
        if bearing and invented and rng.random() < 0.6:
            p = rng.uniform(0.05, 0.5)
        elif bearing and rng.random() < 0.006:
            p = rng.uniform(0.2, 0.6)
        else:
            p = rng.uniform(0.8, 1.0)
        content.append({
            "token": token,
            "logprob": math.log(p),
            "bytes": list(token.encode("utf-8")),
            "top_logprobs": [],
        })
    return {"content": content}


def answer_logprobs(row: dict[str, Any]) -> dict[str, Any]:
    """The synthetic log-probabilities of a sample row's own answer, as ingested by the demo.

    The row's random stream first draws the answer's age (one draw, in ``demo_answers``), then
    the probabilities; the demo generator replays the same probabilities with the answer.
    """
    rng = random.Random(row["id"])
    rng.random()
    return _logprobs(row["response"], row["labels"], rng)


def synthetic_logprobs(text: str, spans: list[tuple[int, int]], seed: str) -> dict[str, Any]:
    """Log-probabilities for ``text`` as ``answer_logprobs`` makes them, with ``spans`` as the
    invented parts (the demo generator's varied answers)."""
    labels = [{"start": s, "end": e} for s, e in spans]
    return _logprobs(text, labels, random.Random(seed))


# RAGTruth's QA prompt (the wording its generators were given), behind a short system prompt.
DEMO_SYSTEM_PROMPT = "You are a helpful assistant. Answer only from the passages you are given."
DEMO_USER_PROMPT = (
    "Briefly answer the following question:\n{question}\n"
    "Bear in mind that your response should be strictly based on the following {count} "
    "passages:\n{passages}\n"
    "In case the passages do not contain the necessary information to answer the question, "
    'please reply with: "Unable to answer based on given passages."\n'
    "output:"
)


def demo_messages(question: str, passages: list[str]) -> list[dict[str, str]]:
    """The OpenAI messages a RAG service sent for ``question`` with its retrieved passages."""
    shown = "\n".join(f"passage {i}: {p}" for i, p in enumerate(passages, start=1))
    user = DEMO_USER_PROMPT.format(question=question, count=len(passages), passages=shown)
    return [{"role": "system", "content": DEMO_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _similarity(question: str, passage: str) -> float:
    q = {w.lower() for w in WORD_RE.findall(question)}
    p = {w.lower() for w in WORD_RE.findall(passage)}
    overlap = len(q & p) / len(q) if q else 0.0
    return round(0.35 + 0.6 * overlap, 3)


def demo_answers(*, use_case: str, now: datetime, weeks: int = 8) -> Iterator[dict[str, Any]]:
    """Ingest bodies for the demo, spread over the last `weeks` weeks."""
    with SAMPLE_FILE.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    for row in rows:
        rng = random.Random(row["id"])  # the same stream as answer_logprobs: one draw, the age
        created = now - timedelta(seconds=rng.uniform(0, weeks * 7 * 86400))
        yield {
            "external_id": f"ragtruth-{row['id']}",
            "use_case": use_case,
            "question": row["question"],
            "answer": row["response"],
            "model": row["model"],
            "chunks": [
                {"text": p, "id": f"{row['id']}-p{i}", "score": _similarity(row["question"], p),
                 "source": "MS MARCO"}
                for i, p in enumerate(row["passages"], start=1)
            ],
            "logprobs": _logprobs(row["response"], row["labels"], rng),
            "messages": demo_messages(row["question"], row["passages"]),
            "created_at": created.isoformat(),
            "metadata": {
                "source": "RAGTruth QA (MIT)",
                "human_labels": len(row["labels"]),
                "synthetic_logprobs": True,
            },
        }
