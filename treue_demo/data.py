"""Demo data: real RAG answers (RAGTruth QA, MIT licence) turned into months of traffic.

RAGTruth (``demo/``, see its README) holds 3,956 answers of four models to 989 web search
questions, each with human hallucination labels. The demo replays them as the traffic of three
use cases over ``WEEKS`` weeks and the current one (``USE_CASES``, ``week_answers``): a large
healthy one, one whose team switches to a weaker model and then degrades, and a small one whose
single weeks say little without the 4-week view. A week draws its answers from the models'
answers at random; over 14 weeks an answer comes up several times, each time under its own
external id and time, as the same question is asked again.

RAGTruth carries no log-probabilities. The demo invents them, deterministically: content-bearing
tokens inside a labelled span often get a low probability, others rarely do — so the demo's
tier 1 behaves like a useful (imperfect) trigger. They are marked as synthetic in each answer's
metadata.

Each answer also carries the chat messages that produced it (``demo_messages``: a system prompt
and RAGTruth's QA prompt with the passages and the question), as a RAG service would send them,
so that a self-consistency investigation can re-ask them. In the demo, the generator it re-asks
is ``treue_demo.server``, which replays these answers with scripted variation.

Plain Python: the seed command (``seed_demo``) turns the week bounds into bodies to ingest.
"""

import functools
import hashlib
import json
import math
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# The model name the demo judge answers as. Its verdicts are replayed human labels, not a model's
# judgement, and the pages say so wherever a run of this "model" is shown.
DEMO_JUDGE_MODEL = "treue-demo-judge"
DEMO_DIR = Path(__file__).resolve().parent.parent / "demo"
SOURCES_FILE = DEMO_DIR / "ragtruth_qa_sources.jsonl"
ANSWERS_FILE = DEMO_DIR / "ragtruth_qa_answers.jsonl"
# Letters (up to 7), digits (up to 3), one other character, or blanks: every character is in
# one of them, so the pieces spell any text, and none is longer than a real token.
TOKEN_RE = re.compile(r"\s*(?:[^\W\d_]{1,7}|\d{1,3}|[^\w\s]|_)|\s+")
WORD_RE = re.compile(r"\w+")


def _tokens(text: str) -> list[tuple[int, str]]:
    """BPE-like pieces with their start offsets; they spell `text` exactly."""
    return [(m.start(), m.group()) for m in TOKEN_RE.finditer(text)]


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
    """The synthetic log-probabilities of a RAGTruth row's own answer, as the demo ingests it
    (every time it does) and the demo generator replays it."""
    return _logprobs(row["response"], row["labels"], random.Random(row["id"]))


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


@functools.cache
def load_rows() -> tuple[dict[str, Any], ...]:
    """Every RAGTruth QA answer as one row — ``id``, ``question``, ``passages``, ``response``,
    ``model``, ``labels`` (``start``, ``end``, ``label_type``) — in the order of their ids.
    Read once per process; callers must not change the rows."""
    sources = {}
    with SOURCES_FILE.open(encoding="utf-8") as fh:
        for line in fh:
            source = json.loads(line)
            sources[source["source_id"]] = source
    rows = []
    with ANSWERS_FILE.open(encoding="utf-8") as fh:
        for line in fh:
            answer = json.loads(line)
            source = sources[answer["source_id"]]
            rows.append({
                "id": answer["id"],
                "question": source["question"],
                "passages": source["passages"],
                "response": answer["response"],
                "model": answer["model"],
                "labels": answer["labels"],
            })
    return tuple(rows)


# --- The story the demo tells ------------------------------------------------------------------

# Complete weeks before the current one. 14 fill the overview's 8 weeks and leave the use-case
# page's trend (26 weeks) a quarter of a year to show a change against.
WEEKS = 14


@dataclass(frozen=True)
class Phase:
    """From `first_week` on, a use case's answers come from these models' RAGTruth answers."""

    first_week: int
    models: tuple[str, ...]
    # Share of answers drawn from those the annotators labelled (hallucinations); None: the
    # models' own share (llama-2-7b 52 %, llama-2-13b 40 %, mistral-7B 38 %, llama-2-70b 32 %).
    hallucinated: float | None = None


@dataclass(frozen=True)
class DemoUseCase:
    slug: str
    name: str
    prefix: str  # of the external ids
    per_week: int  # answers in a whole week
    # The demo samples 15–20 % of the unflagged answers, not the product's 3 % default: at a
    # few hundred answers a week, 3 % judges 5–15 of them at random, which is what a week's
    # interval rests on, and every week would be too wide to decide (the pages then say which
    # rate would decide it). 15–20 % gives tens a week, as a real use case of this size needs
    # (20 % where tier 1 flags most answers and leaves few to draw from); the small use case
    # shows what is left even so, and what the 4-week view adds.
    sample_rate: float
    phases: tuple[Phase, ...]
    story: str  # one line for the seed command's output

    def phase(self, week: int) -> Phase:
        return [p for p in self.phases if p.first_week <= week][-1]


# The week after which the support assistant degrades: its team moved to a smaller model in week
# DEGRADES_AFTER + 1, and more of its answers invent content from then on.
DEGRADES_AFTER = 9
USE_CASES = (
    # Around 0.9 on the annotators' scale: green, with the judge a little above the experts.
    DemoUseCase(
        slug="demo-wissenssuche", name="Demo: Wissenssuche (RAGTruth)", prefix="wissen",
        per_week=400, sample_rate=0.15,
        phases=(Phase(1, ("llama-2-70b-chat", "llama-2-13b-chat", "mistral-7B-instruct")),),
        story="gesund, um 0,90 / healthy, around 0.90",
    ),
    # About 0.9 until week DEGRADES_AFTER, then below 0.85 and falling (0.85, 0.81, 0.77 on
    # the annotators' scale): amber, then red, and a trend.
    DemoUseCase(
        slug="demo-kundenservice", name="Demo: Kundenservice (Modellwechsel)",
        prefix="service", per_week=250, sample_rate=0.20,
        phases=(
            Phase(1, ("llama-2-13b-chat",)),
            Phase(DEGRADES_AFTER + 1, ("llama-2-7b-chat",), hallucinated=0.6),
            Phase(DEGRADES_AFTER + 2, ("llama-2-7b-chat",), hallucinated=0.75),
            Phase(DEGRADES_AFTER + 3, ("llama-2-7b-chat",), hallucinated=0.9),
        ),
        story=f"nach Woche {DEGRADES_AFTER} schlechter (anderes Modell) / degrades after week "
              f"{DEGRADES_AFTER} (another model)",
    ),
    # 50 answers a week: a single week's interval is wide, the 4-week view decides.
    DemoUseCase(
        slug="demo-intranet", name="Demo: Intranet-FAQ (klein)", prefix="intranet",
        per_week=50, sample_rate=0.20,
        phases=(Phase(1, ("mistral-7B-instruct",)),),
        story="klein, 50 Antworten je Woche / small, 50 answers a week",
    ),
)


@dataclass(frozen=True)
class Slot:
    """One planned answer: which RAGTruth row, and when in its week (seconds after Monday)."""

    external_id: str
    row: dict[str, Any]
    offset: float


def planned(case: DemoUseCase, week: int, *, scale: float = 1.0) -> list[Slot]:
    """The answers of `case` in demo week `week` (1 … WEEKS + 1, the last the current week),
    `scale` times its volume. Deterministic: the same call plans the same answers, so seeding
    again stores nothing twice. Within a week no answer repeats while the models have others."""
    phase = case.phase(week)
    rng = random.Random(f"{case.slug}:{week}")
    rows = [r for r in load_rows() if r["model"] in phase.models]
    count = round(case.per_week * scale)
    if phase.hallucinated is None:
        pools = [rows]
        pick = [0] * count
    else:
        pools = [[r for r in rows if r["labels"]], [r for r in rows if not r["labels"]]]
        pick = [0 if rng.random() < phase.hallucinated else 1 for _ in range(count)]
    for pool in pools:
        rng.shuffle(pool)
    used = [0] * len(pools)
    slots = []
    for i, which in enumerate(pick, start=1):
        pool = pools[which]
        row = pool[used[which] % len(pool)]
        used[which] += 1
        slots.append(Slot(f"{case.prefix}-w{week:02d}-{i:04d}", row,
                          rng.uniform(0, 7 * 86400)))
    return slots


def week_answers(
    case: DemoUseCase, week: int, *, start: datetime, end: datetime, until: datetime | None = None,
    scale: float = 1.0,
) -> list[dict[str, Any]]:
    """Ingest bodies of `planned` answers in the week from `start` to `end` (7 days, or one hour
    more or less when the clocks change), leaving out those at `until` or later."""
    length = (end - start).total_seconds() / (7 * 86400)
    bodies = []
    for slot in planned(case, week, scale=scale):
        created = start + timedelta(seconds=slot.offset * length)
        if until is not None and created >= until:
            continue
        bodies.append(answer_body(slot.row, use_case=case.slug, external_id=slot.external_id,
                                  created=created))
    return bodies


# The metadata key the demo's use cases declare (issue 40): the channel an answer went out on,
# drawn from the external id, so the same answer always has the same channel.
DEMO_SEGMENT_KEY = "kanal"
CHANNELS = (("chat", 6), ("mail", 3), ("telefon", 1))


def channel_of(external_id: str) -> str:
    """chat, mail or telefon (6:3:1), fixed by the external id."""
    draw = int(hashlib.sha256(external_id.encode()).hexdigest()[:8], 16) % 10
    for name, weight in CHANNELS:
        if draw < weight:
            return name
        draw -= weight
    return CHANNELS[-1][0]


def answer_body(
    row: dict[str, Any], *, use_case: str, external_id: str, created: datetime
) -> dict[str, Any]:
    """The ingest body of a RAGTruth row, as a RAG service would send it."""
    return {
        "external_id": external_id,
        "use_case": use_case,
        "question": row["question"],
        "answer": row["response"],
        "model": row["model"],
        "chunks": [
            {"text": p, "id": f"{row['id']}-p{i}", "score": _similarity(row["question"], p),
             "source": "MS MARCO"}
            for i, p in enumerate(row["passages"], start=1)
        ],
        "logprobs": answer_logprobs(row),
        "messages": demo_messages(row["question"], row["passages"]),
        "created_at": created.isoformat(),
        "metadata": {
            DEMO_SEGMENT_KEY: channel_of(external_id),
            "source": "RAGTruth QA (MIT)",
            "ragtruth_id": row["id"],
            "human_labels": len(row["labels"]),
            "synthetic_logprobs": True,
        },
    }
