"""The demo judge's replies: it recognises each judge prompt (decomposition, per claim, batched,
one call, self-consistency) by its system message and answers from the human labels, in the
shape the prompt asks (lines, bare words, JSON, a schema)."""

import difflib
import json
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from investigations.domain.consistency import prompt as consistency_prompts
from judging.domain import batched, single
from judging.domain import judge_prompt as prompts
from judging.domain.judge_parse import LABEL_POINTS, Label
from treue_demo.answers import (
    DemoAnswer,
    claims_of,
    label_for,
    message_text,
    split_claims,
)
from treue_demo.data import (
    DEMO_JUDGE_MODEL,
)
from treue_demo.word_check import WORD, word_check


def _pattern(
    template: str, lazy: str | tuple[str, ...] = "", shapes: dict[str, str] | None = None
) -> re.Pattern[str]:
    """A regex that reads the placeholders back out of a prompt template; the fields ``lazy``
    take as little as they can (a question before samples that hold blank lines), those in
    ``shapes`` only what their regex matches (a count: digits)."""
    names = {"kontext": "context", "aussage": "claim"}  # the article's German names
    lazy = (lazy,) if isinstance(lazy, str) else lazy
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            shape = (shapes or {}).get(field, f".*{'?' if field in lazy else ''}")
            parts.append(f"(?P<{names.get(field, field)}>{shape})")
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


_CONSISTENCY_USER = [
    _pattern(consistency_prompts.USER_DE, lazy="question"),
    _pattern(consistency_prompts.USER_EN, lazy="question"),
]


_SAMPLE_HEADER = re.compile(r"(?:\A|\n\n)(?:Antwort|Answer) \d+:\n")


_EMPTY_SAMPLES = {consistency_prompts.EMPTY_DE, consistency_prompts.EMPTY_EN}


_DECOMPOSE_SYSTEMS = {prompts.DECOMPOSE_SYSTEM_DE, prompts.DECOMPOSE_SYSTEM_EN}


_VERIFY_SYSTEMS = {prompts.VERIFY_SYSTEM_DE, prompts.VERIFY_SYSTEM_EN}


# Batched and one-call requests: the system message is the instructions and then one of the
# reply formats (judging/domain/batched.py, single.py), recognised by its start.
_BATCH_SYSTEMS = {batched.VERIFY_BATCH_SYSTEM_DE: "de", batched.VERIFY_BATCH_SYSTEM_EN: "en"}


_SINGLE_SYSTEMS = {single.SINGLE_SYSTEM_DE: "de", single.SINGLE_SYSTEM_EN: "en"}


# The formats that ask for the word alone (no chunks, no reason), and those that ask for JSON.
_BARE_FORMATS = frozenset({
    batched.FORMAT_BARE_DE, batched.FORMAT_BARE_EN, batched.FORMAT_JSON_BARE_DE,
    batched.FORMAT_JSON_BARE_EN, single.FORMAT_BARE_DE, single.FORMAT_BARE_EN,
})


_JSON_FORMATS = frozenset({
    batched.FORMAT_JSON_DE, batched.FORMAT_JSON_EN, batched.FORMAT_JSON_BARE_DE,
    batched.FORMAT_JSON_BARE_EN,
})


# A batched request: the context, then "Aussagen (3):" and a line per claim, "K7: <claim>".
# The context is greedy: the claims follow the last such header (a passage may hold one too).
_BATCH_USER = [
    _pattern(batched.VERIFY_BATCH_USER_DE, shapes={"count": r"\d{1,4}"}),
    _pattern(batched.VERIFY_BATCH_USER_EN, shapes={"count": r"\d{1,4}"}),
]


_LISTED = re.compile(r"^(?P<id>[A-Za-z][0-9]): (?P<claim>.*)$", re.MULTILINE)


# The ids a correction names, on its first line ("Für K7, M2 fehlt ein lesbares Urteil.").
_NAMED_ID = re.compile(r"\b([A-Za-z][0-9])\b")


# A one-call request: question, answer, context (the answer ends at the first context header).
_SINGLE_USER = [
    _pattern(single.SINGLE_USER_DE, lazy=("question", "answer")),
    _pattern(single.SINGLE_USER_EN, lazy=("question", "answer")),
]


_RANKED = re.compile(r"^\[(?P<rank>\d+)\] ", re.MULTILINE)


_DECOMPOSE_USER = [_pattern(prompts.DECOMPOSE_USER_DE), _pattern(prompts.DECOMPOSE_USER_EN)]


_VERIFY_USER = [_pattern(prompts.VERIFY_USER_DE), _pattern(prompts.VERIFY_USER_EN)]


# For wording this module does not know (a later prompt version): the last labelled field.
_LOOSE_ANSWER = re.compile(r"(?:Antwort|Answer):\s*\n(?P<answer>.*?)(?:\n\n[^\n]*:\s*)?\Z",
                           re.DOTALL)


_LOOSE_CLAIM = re.compile(r"^(?:Aussage|Claim):[ \t]*(?P<claim>.+)$", re.MULTILINE)


def _match(patterns: Sequence[re.Pattern[str]], text: str) -> re.Match[str] | None:
    return next((m for p in patterns if (m := p.match(text))), None)


# Candidates for the judge comparison (review's "Prüfmodelle vergleichen") in the demo: the
# demo judge with a bias, so that comparing one against the experts' labels shows something.
# The strict one calls partly supported claims unsupported, the lenient one the reverse.
JUDGE_VARIANTS: dict[str, dict[str, str]] = {
    f"{DEMO_JUDGE_MODEL}-strict": {"TEILWEISE": "UNGEDECKT"},
    f"{DEMO_JUDGE_MODEL}-lenient": {"UNGEDECKT": "TEILWEISE"},
}


VERDICT_WORD = re.compile(r"\b(?:GEDECKT|TEILWEISE|UNGEDECKT)\b")


VERDICT_FIELD = re.compile(r'(?<="verdict":")(?:GEDECKT|TEILWEISE|UNGEDECKT)(?=")')


# The demo judge's one-sentence reasons, in the prompt's language: where its verdict came from.
REASONS: dict[str, dict[str, dict[Label, str]]] = {
    "en": {
        "human label": {
            Label.GEDECKT: "The human annotators found nothing unsupported in this claim.",
            Label.TEILWEISE: "The human annotators marked part of this claim as unsupported.",
            Label.UNGEDECKT: "The human annotators marked this claim as unsupported.",
        },
        "word check": {
            Label.GEDECKT: "Its numbers and negations all appear in the passages.",
            Label.TEILWEISE: "Some of its words do not appear in the passages.",
            Label.UNGEDECKT: "A number or negation in it does not appear in the passages.",
        },
    },
    "de": {
        "human label": {
            Label.GEDECKT: "Die menschlichen Annotatoren fanden hier nichts Ungedecktes.",
            Label.TEILWEISE: "Die menschlichen Annotatoren markierten einen Teil als ungedeckt.",
            Label.UNGEDECKT: "Die menschlichen Annotatoren markierten die Aussage als ungedeckt.",
        },
        "word check": {
            Label.GEDECKT: "Ihre Zahlen und Verneinungen stehen alle in den Abschnitten.",
            Label.TEILWEISE: "Einige ihrer Wörter stehen nicht in den Abschnitten.",
            Label.UNGEDECKT: "Eine Zahl oder Verneinung steht nicht in den Abschnitten.",
        },
    },
}


class DemoJudge:
    """Answers judge requests (lists of chat messages) from the demo answers' human labels."""

    def __init__(self, answers: Sequence[DemoAnswer]) -> None:
        self.answers = list(answers)
        self._by_text = {a.response.strip(): a for a in self.answers}
        # Claims as this judge decomposes them, to the answers holding them: verification
        # looks a claim up here instead of searching 4,000 answers for it.
        self._by_claim: dict[str, list[DemoAnswer]] = {}
        for answer in self.answers:
            for claim in claims_of(answer):
                self._by_claim.setdefault(claim, []).append(answer)

    def reply(
        self, messages: Sequence[Any], response_format: Any = None
    ) -> tuple[str, str]:
        """The reply text and a short note for the log ("decompose 12794: 7 claims").
        ``response_format``: the request's, a JSON schema that a batched or one-call reply
        keeps to."""
        system = next((message_text(m.get("content")) for m in messages
                       if isinstance(m, dict) and m.get("role") == "system"), "")
        # The first user turn holds the task; a retry adds the previous reply and a reminder.
        turns = [message_text(m.get("content")) for m in messages
                 if isinstance(m, dict) and m.get("role") == "user"]
        user = turns[0] if turns else ""
        if system in _VERIFY_SYSTEMS:
            return self._verify(user)
        batch = next((prefix for prefix in _BATCH_SYSTEMS if system.startswith(prefix)), None)
        if batch is not None:
            # A correction (a later user turn, after the judge's reply) names the ids still open.
            correction = turns[-1] if len(turns) > 1 else None
            return self._verify_batch(
                user, _BATCH_SYSTEMS[batch], _Shape.of(system[len(batch):], response_format),
                correction,
            )
        one = next((prefix for prefix in _SINGLE_SYSTEMS if system.startswith(prefix)), None)
        if one is not None:
            return self._single(user, _SINGLE_SYSTEMS[one],
                                _Shape.of(system[len(one):], response_format))
        if system in _DECOMPOSE_SYSTEMS:
            return self._decompose(user)
        if system in (consistency_prompts.SYSTEM_DE, consistency_prompts.SYSTEM_EN) or _match(
            _CONSISTENCY_USER, user
        ):
            return self._contradiction(user)
        if _match(_VERIFY_USER, user) or "UNGEDECKT" in user:
            return self._verify(user)
        return self._decompose(user)

    def _decompose(self, user: str) -> tuple[str, str]:
        match = _match(_DECOMPOSE_USER, user) or _LOOSE_ANSWER.search(user)
        text = (match.group("answer") if match else user).strip()
        claims, known = self._claims(text, user)
        note = f"decompose {known.id if known else 'unknown answer'}: {len(claims)} claims"
        return json.dumps(claims, ensure_ascii=False), note

    def _claims(self, text: str, around: str) -> tuple[list[str], "DemoAnswer | None"]:
        """The claims of the answer ``text`` (the demo answer it is, or the longest one found
        in ``around``, taken whole) and that demo answer, if any."""
        known = self._by_text.get(text) or self._contained_in(around)
        if known is not None:
            text = known.response
        return list(dict.fromkeys(text[s:e] for s, e in split_claims(text))), known

    def _contained_in(self, user: str) -> DemoAnswer | None:
        found = [a for a in self.answers if a.response.strip() and a.response.strip() in user]
        return max(found, key=lambda a: len(a.response), default=None)

    def _contradiction(self, user: str) -> tuple[str, str]:
        """WIDERSPRUCH when the samples of a demo answer differ inside its labelled spans."""
        match = _match(_CONSISTENCY_USER, user)
        german = match is None or match.re is _CONSISTENCY_USER[0]
        question = match.group("question").strip() if match else ""
        shown = match.group("samples") if match else user
        samples = [
            "" if text.strip() in _EMPTY_SAMPLES else text.strip()
            for text in _SAMPLE_HEADER.split(shown)[1:]
        ]

        def reply(contradiction: bool, de: str, en: str) -> str:
            word = ("WIDERSPRUCH" if german else "CONTRADICTION") if contradiction else (
                "KONSISTENT" if german else "CONSISTENT")
            return f"{word}\n{de if german else en}"

        if len({" ".join(t.split()) for t in samples}) <= 1:
            return (reply(False, "Die Antworten sind wortgleich.", "The answers are identical."),
                    "contradiction: identical samples")
        candidates = [a for a in self.answers if a.question.strip() == question]
        if not candidates:
            return (reply(False, "Demo-Prüfer: unbekannte Antworten, nicht verglichen.",
                          "Demo judge: unknown answers, not compared."),
                    "contradiction unknown question: KONSISTENT (fallback)")
        # Several models answered some questions: the one whose answer the samples resemble.
        answer = max(candidates, key=lambda a: difflib.SequenceMatcher(
            None, a.response, samples[0], autojunk=False).ratio())
        for number, sample in enumerate(samples, 1):
            fragment = _labelled_difference(answer, sample)
            if fragment is not None:
                return (reply(True, f"Antwort {number} weicht an einer gelabelten Stelle ab: "
                                    f"„{fragment}“.",
                              f"Answer {number} differs in a labelled span: “{fragment}”."),
                        f"contradiction {answer.id}: WIDERSPRUCH")
        return (reply(False, "Die Antworten unterscheiden sich nur außerhalb gelabelter Stellen.",
                      "The answers differ only outside labelled spans."),
                f"contradiction {answer.id}: KONSISTENT")

    def _verify_batch(
        self, user: str, language: str, shape: "_Shape", correction: str | None = None
    ) -> tuple[str, str]:
        """A verdict per listed claim under its id: its label as `_verify` gives it, the chunk
        that shares the most of its words and where the label came from — a line each
        (``K7: GEDECKT [2] reason``, or ``K7: GEDECKT`` where the format asks for the word
        alone), or JSON in the batch schema. A correction is answered for the ids it names."""
        match = _match(_BATCH_USER, user)
        if match is None:
            return "", "verify batch: unreadable request"
        context = match.group("context")
        listed = [(m.group("id"), m.group("claim").strip())
                  for m in _LISTED.finditer(match.group("claims"))]
        if correction is not None:
            named = {i.upper() for i in _NAMED_ID.findall(correction.split("\n", 1)[0])}
            listed = [(id_, claim) for id_, claim in listed if id_.upper() in named] or listed
        chunks = _ranked_chunks(context)
        verdicts = []
        for id_, claim in listed:
            label, rank, reason = self._evidence(claim, context, chunks, language)
            verdicts.append({"id": id_, "verdict": label.value,
                             "chunks": [rank] if rank else [], "reason": reason})
        kind = "correction" if correction is not None else "verify batch"
        note = f"{kind}: {len(verdicts)} claims{' (json)' if shape.json else ''}"
        if shape.json:
            return _json_reply("verdicts", verdicts, shape), note
        if not shape.evidence:
            return "\n".join(f"{v['id']}: {v['verdict']}" for v in verdicts), note
        return "\n".join(
            f"{v['id']}: {v['verdict']} [{''.join(map(str, v['chunks']))}] {v['reason']}"
            for v in verdicts
        ), note

    def _single(self, user: str, language: str, shape: "_Shape") -> tuple[str, str]:
        """The one-call reply: the answer's claims as `_decompose` splits them, each with its
        verdict as `_verify_batch` gives it, as JSON (always: the format asks for it). A
        correction gets the same reply."""
        match = _match(_SINGLE_USER, user)
        text = (match.group("answer") if match else user).strip()
        context = match.group("context") if match else user
        claims, known = self._claims(text, text if match else user)
        chunks = _ranked_chunks(context)
        items = []
        for claim in claims:
            label, rank, reason = self._evidence(claim, context, chunks, language)
            items.append({"claim": claim, "verdict": label.value,
                          "chunks": [rank] if rank else [], "reason": reason})
        note = f"single {known.id if known else 'unknown answer'}: {len(items)} claims"
        return _json_reply("claims", items, shape), note

    def _evidence(
        self, claim: str, context: str, chunks: dict[int, str], language: str
    ) -> tuple[Label, int | None, str]:
        """A claim's label, the rank of the chunk sharing most of its words (None for an
        unsupported claim, or without chunks) and a sentence on where the label came from."""
        label, note = self._label(claim, context)
        words = set(WORD.findall(claim.lower()))
        best = max(chunks, key=lambda r: len(words & set(WORD.findall(chunks[r].lower()))),
                   default=None)
        rank = None if label is Label.UNGEDECKT else best
        kind = "word check" if "word check" in note else "human label"
        return label, rank, REASONS[language][kind][label]

    def _verify(self, user: str) -> tuple[str, str]:
        match = _match(_VERIFY_USER, user)
        if match:
            claim, context = match.group("claim").strip(), match.group("context")
        else:
            loose = _LOOSE_CLAIM.search(user)
            claim, context = (loose.group("claim").strip() if loose else ""), user
        label, note = self._label(claim, context)
        return label.value, note

    def _label(self, claim: str, context: str) -> tuple[Label, str]:
        """The label of ``claim`` against ``context``, and a note for the log."""
        # The same sentence can occur in several answers; their passages tell them apart.
        candidates = self._by_claim.get(claim, [])
        in_context = [a for a in candidates if all(p in context for p in a.passages)]
        if not in_context:  # not a sentence as split here: any answer holding it
            candidates = [a for a in self.answers if claim and claim in a.response]
            in_context = [a for a in candidates if all(p in context for p in a.passages)]
        if not candidates:
            label = word_check(claim, context)
            return label, f"verify unknown claim: {label.value} (word check)"
        # Several models may say the same sentence to the same question, and annotators
        # labelled it in one answer but not in another: the lenient judge takes the kinder
        # verdict (so an answer without labels is never marked down).
        label, answer = max(((label_for(a, claim), a) for a in in_context or candidates),
                            key=lambda pair: LABEL_POINTS[pair[0]])
        return label, f"verify {answer.id}: {label.value}"


@dataclass(frozen=True)
class _Shape:
    """How a batched or one-call reply is to look: JSON or lines, with evidence (chunk ranks
    and a reason) or the word alone; and, for JSON, the fields each item has."""

    json: bool
    evidence: bool
    fields: tuple[str, ...] | None = None  # the schema's item properties, where one was sent

    @classmethod
    def of(cls, form: str, response_format: Any) -> "_Shape":
        """From the format appended to the system message and the request's response_format
        (a JSON schema decides both where it names its items' fields)."""
        evidence = form not in _BARE_FORMATS
        as_json = form in _JSON_FORMATS or form in (single.FORMAT_DE, single.FORMAT_EN) or (
            isinstance(response_format, dict)
            and response_format.get("type") in ("json_schema", "json_object")
        )
        fields = _item_fields(response_format)
        if fields is not None:
            evidence = "chunks" in fields or "reason" in fields
        return cls(as_json, evidence, fields)


def _item_fields(response_format: Any) -> tuple[str, ...] | None:
    """The properties of the items of a JSON schema's one list ({"verdicts": [{…}]}), if it
    has that shape."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    lists = [v for v in (schema.get("properties") or {}).values()
             if isinstance(v, dict) and v.get("type") == "array"]
    items = lists[0].get("items") if len(lists) == 1 else None
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    return tuple(items["properties"])


def _json_reply(key: str, items: list[dict[str, Any]], shape: _Shape) -> str:
    """``{key: items}`` as a model writes it in structured output (no blanks), each item with
    the schema's fields, or without chunks and reason where the format asks for the word."""
    keep = shape.fields if shape.fields is not None else (
        None if shape.evidence else ("id", "claim", "verdict"))
    if keep is not None:
        items = [{k: v for k, v in item.items() if k in keep} for item in items]
    return json.dumps({key: items}, ensure_ascii=False, separators=(",", ":"))


def _ranked_chunks(context: str) -> dict[int, str]:
    """Each chunk of a context by its rank: "[2] text" up to the next "[n] " at a line start."""
    starts = list(_RANKED.finditer(context))
    return {
        int(m.group("rank")): context[m.end():(starts[i + 1].start() if i + 1 < len(starts)
                                              else len(context))]
        for i, m in enumerate(starts)
    }


def _labelled_difference(answer: DemoAnswer, sample: str) -> str | None:
    """What ``sample`` says differently from ``answer`` inside a labelled span, or None."""
    matcher = difflib.SequenceMatcher(None, answer.response, sample, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if any(i1 < e and s < i2 if i1 < i2 else s <= i1 <= e for s, e in answer.spans):
            changed = " ".join((sample[j1:j2] or answer.response[i1:i2]).split())
            return changed if len(changed) <= 80 else changed[:79] + "…"
    return None
