"""What judging an answer deals in, without the flow (verification.py): the modes and the paths
a judgement's verdicts took, a call's result and record, a claim's verdict, the judgement, and the
cache of verdicts that lets a retried run ask only for what is missing.
"""

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from judging.domain.judge_parse import Label
from judging.domain.scoring import ScoreResult

DECOMPOSITION_UNPARSEABLE = "decomposition unparseable"

# How the claims are verified: one call per claim (the article's prompt, word for word), or
# all claims of an answer in one call (fewer calls and tokens, with evidence per claim).
PER_CLAIM = "per-claim"
BATCHED = "batched"
SINGLE = "single"
MODES = (PER_CLAIM, BATCHED, SINGLE)

# The way a judgement's verdicts came (worst first wins where batches differ): one call per
# claim; read from the batched reply; after one correction in the same conversation; some
# asked again one by one; all from the one-call reply.
PATH_PER_CLAIM = "per-claim"
PATH_BATCHED = "batched"
PATH_CORRECTED = "corrected"
PATH_FALLBACK = "fallback"
PATH_SINGLE = "single"
PATHS = (PATH_PER_CLAIM, PATH_BATCHED, PATH_CORRECTED, PATH_FALLBACK, PATH_SINGLE)


def mode_of_prompt_version(version: str) -> str:
    """The mode a run's prompt version belongs to: batched versions end "-b<n>", one-call
    versions "-s<n>" (every version before batched mode existed verified one claim per call)."""
    tail = version.rsplit("-", 1)[-1]
    if tail[1:].isdigit() and tail[:1] in ("b", "s"):
        return BATCHED if tail[0] == "b" else SINGLE
    return PER_CLAIM


@dataclass(frozen=True, slots=True)
class CallResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    model: str  # as the endpoint reports it (may name a dated snapshot of the configured model)
    # Of prompt_tokens, those the provider served from its prefix cache (billed cheaper).
    cached_tokens: int = 0
    # False when the endpoint's usage figures could not be believed (usage_figure): the call
    # counts, its tokens are recorded as 0 and the run says how many calls it could not price.
    usage_known: bool = True
    # The reply stopped at its token limit (finish_reason "length"): its end may be a stump.
    truncated: bool = False


# A single call's token count beyond this is no count (a chat completion's context is at most
# a few hundred thousand tokens; 10**7 leaves room for any model to come): an endpoint that
# reports it is not believed, whatever it meant.
MAX_CALL_TOKENS = 10**7


def usage_figure(value: object) -> int | None:
    """A token figure an endpoint reported, or None where it cannot be one: not a whole number
    (a float, a string, a bool), below 0 or above MAX_CALL_TOKENS. Such figures came as -5 and
    10**30 and broke the run at its end (the database's integer overflowed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_CALL_TOKENS else None


JudgeCall = Callable[[list[dict[str, str]]], CallResult]


class BatchCall(Protocol):
    """A call that may carry a JSON schema (`response_format`); raises
    `batched.StructuredOutputRefused` when the endpoint refuses one."""

    def __call__(
        self, messages: list[dict[str, str]], response_format: dict[str, Any] | None = None
    ) -> CallResult: ...


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call as made, for the audit trail: every raw reply, including retried ones."""

    purpose: str  # "decompose" | "verify" | "verify_batch" | "correct_batch" | "single" ...
    position: int | None  # the claim's position for "verify", the batch's first for a batch
    attempt: int  # 1, or 2 for the retry
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    model: str
    cached_tokens: int = 0
    usage_known: bool = True


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    position: int  # 0-based, the claim's place in the decomposition
    claim: str
    label: Label
    raw: str  # the reply the label was read from (the retry's, if there was one)
    attempts: int  # calls made for this claim in this judgement: 1, 2, or 0 when cached
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int  # summed over the attempts
    cached: bool
    model: str = ""
    # The judge's evidence, where it gives one (batched mode): the ranks of the chunks the
    # verdict rests on and a sentence why.
    chunks: tuple[int, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Judgement:
    claims: tuple[ClaimVerdict, ...]
    decomposition_raw: str
    result: ScoreResult
    calls: int
    prompt_tokens: int
    completion_tokens: int
    failed_reason: str | None  # set whenever result.failed
    call_log: tuple[CallRecord, ...] = ()
    cached_tokens: int = 0  # of prompt_tokens
    usage_unknown_calls: int = 0  # of calls, those whose tokens the endpoint misreported
    path: str = ""  # PATHS; "" when there was nothing to verify


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    label: Label
    raw: str
    model: str
    chunks: tuple[int, ...] = ()
    reason: str = ""


# (language, claim, sha256 of the context): the digest keeps a run-wide cache small when
# contexts are long.
CacheKey = tuple[str, str, str]
VerdictCache = MutableMapping[CacheKey, CachedVerdict]


@dataclass(slots=True)
class Structured:
    """Whether batch calls send a JSON schema: known (True/False) or to be found out (None),
    and who to tell what was found."""

    supported: bool | None
    report: Callable[[bool, str], None] | None = None

    def learned(self, supported: bool, detail: str) -> None:
        # Told what was found out, and what changed since (a model that stopped keeping to it).
        if self.supported is not supported and self.report is not None:
            self.report(supported, detail)
        self.supported = supported


@dataclass(frozen=True, slots=True)
class Batching:
    """How claims go to the judge in batches: the context, the batch size, the call, whether the
    judge writes its evidence, and whether a JSON schema is sent."""

    chunks: Sequence[str]
    size: int
    call: BatchCall
    evidence: bool = True
    structured: Structured = field(default_factory=lambda: Structured(False))
