"""Pydantic schemas of the ingest API: what a RAG service may send and what it gets back.

Validation is strict where a lax coercion would hide a client bug ("0.5" for a number, 1 for a
string) and every string is checked for what PostgreSQL cannot store (NUL, unpaired surrogates),
so that bad input becomes a 400 with the field named instead of a 500 at insert time.
"""

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, NotRequired

from django.utils import timezone
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from typing_extensions import TypedDict

from monitoring.domain.segments import metadata_problems

MAX_QUESTION_CHARS = 50_000
MAX_ANSWER_CHARS = 100_000
MAX_CHUNK_CHARS = 100_000
MAX_CHUNKS = 200
MAX_TOKENS = 32_000
MAX_TOKEN_CHARS = 1000
MAX_TOKEN_BYTES = 4000
MAX_BATCH = 500
MAX_JSON_DEPTH = 32
MAX_METADATA_CHARS = 64_000
MAX_MESSAGES_CHARS = 2_000_000
# Clocks of RAG services drift; a day ahead is a wrong clock or a wrong time zone, not drift.
MAX_FUTURE = timedelta(days=1)


def check_text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("contains invalid Unicode (unpaired surrogate)") from e
    return value


def check_json(value: Any, max_chars: int) -> Any:
    """Walk free-form JSON (metadata, messages): bounded depth and size, storable strings."""
    stack = [(value, 0)]
    size = 0
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"is nested deeper than {MAX_JSON_DEPTH} levels")
        size += len(node) if isinstance(node, str | dict | list) else 1
        if size > max_chars:
            raise ValueError(f"is larger than {max_chars} characters")
        if isinstance(node, str):
            check_text(node)
        elif isinstance(node, dict):
            for key, item in node.items():
                check_text(key)
                size += len(key)
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise ValueError("must not contain NaN or Infinity")
    return value


# Native strict types: they run in pydantic's core, which matters for ~300 tokens per answer.
Text = Annotated[str, Field(strict=True), AfterValidator(check_text)]


# Text with length limits. The limits come before the validator: put after it (as
# `Annotated[Text, Field(max_length=...)]`), pydantic checks them as a generic constraint and
# says "Value should have at least 1 item after validation" instead of naming characters.
_checked = AfterValidator(check_text)
ChunkText = Annotated[str, Field(strict=True, max_length=MAX_CHUNK_CHARS), _checked]
ChunkId = Annotated[str, Field(strict=True, max_length=200), _checked]
SourceName = Annotated[str, Field(strict=True, max_length=500), _checked]
AnswerText = Annotated[str, Field(strict=True, max_length=MAX_ANSWER_CHARS), _checked]
ModelName = Annotated[str, Field(strict=True, min_length=1, max_length=200), _checked]
PromptVersion = Annotated[str, Field(strict=True, min_length=1, max_length=100), _checked]
ExternalId = Annotated[str, Field(strict=True, min_length=1, max_length=200), _checked]
UseCaseSlug = Annotated[
    str, Field(strict=True, min_length=1, max_length=64, pattern=r"^[-a-zA-Z0-9_]+$"), _checked
]
QuestionText = Annotated[
    str, Field(strict=True, min_length=1, max_length=MAX_QUESTION_CHARS), _checked
]


Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
LogProb = Annotated[
    float,
    Field(strict=True, le=0, allow_inf_nan=False, description="at most 0; -9999.0 is valid"),
]
TokenText = Annotated[str, Field(strict=True, max_length=MAX_TOKEN_CHARS)]
Byte = Annotated[int, Field(ge=0, le=255, strict=True)]


# A date and a time of day: pydantic would also take "1700000000" (as Unix seconds) and a bare
# date (as midnight UTC), neither of which the contract's ISO 8601 date-time means.
_ISO_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _iso_only(value: Any) -> Any:
    # Pydantic would read a number as Unix seconds; a client sending 5 meant something else.
    if not isinstance(value, str) or not _ISO_DATE_TIME.match(value):
        raise ValueError("must be an ISO 8601 date and time, like 2026-12-01T09:30:00Z")
    return value


IsoDateTime = Annotated[datetime, BeforeValidator(_iso_only)]


# Tokens are TypedDicts, not models: validation runs for ~300 of them per answer, and a dict
# per token is half the cost of a model instance per token.
class TopLogprob(TypedDict):
    # pydantic's way to configure a TypedDict; mypy does not know the dunder in a TypedDict.
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]  # see above

    token: TokenText
    logprob: LogProb
    bytes: NotRequired[list[Byte] | None]


class TokenLogprob(TypedDict):
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]  # as TopLogprob

    token: TokenText
    logprob: LogProb
    bytes: NotRequired[Annotated[list[Byte], Field(max_length=MAX_TOKEN_BYTES)] | None]
    # The alternatives are neither read nor stored, so like any other key Treue does not read
    # they may hold anything: decoding them is two thirds of an answer's JSON.
    top_logprobs: NotRequired[Any]


class CheckedTokens:
    """Tokens that ingest.decoding already decoded and checked against TokenLogprob."""

    __slots__ = ("tokens",)

    def __init__(self, tokens: list[TokenLogprob]) -> None:
        self.tokens = tokens


class Logprobs(BaseModel):
    """OpenAI's `choices[i].logprobs` object."""

    model_config = ConfigDict(extra="allow")

    content: list[TokenLogprob] | None = Field(default=None, max_length=MAX_TOKENS)

    @field_validator("content", mode="wrap")
    @classmethod
    def _storable_tokens(
        cls, value: Any, handler: ValidatorFunctionWrapHandler
    ) -> list[TokenLogprob] | None:
        # Tokens the fast decoder checked are taken as they are; all others are validated here.
        content = value.tokens if isinstance(value, CheckedTokens) else handler(value)
        # Token strings are stored (compact copy). They are checked joined, in one pass, and
        # only when that finds a problem one by one, to name the token: a check per token cost
        # a tenth of an answer's whole validation.
        if not content:
            return content
        try:
            check_text("".join([t["token"] for t in content]))
        except ValueError:
            for i, t in enumerate(content):
                try:
                    check_text(t["token"])
                except ValueError as e:
                    raise ValueError(f"token {i}: {e}") from e
            raise
        return content


class ChunkIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: ChunkText
    id: ChunkId | None = None
    score: Number | None = Field(default=None, description="retrieval similarity")
    source: SourceName | None = None


class CompletionMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    content: AnswerText | None = None


class CompletionChoice(BaseModel):
    model_config = ConfigDict(extra="allow")

    message: CompletionMessage
    logprobs: Logprobs | None = None


class Completion(BaseModel):
    """A whole OpenAI ChatCompletion; only `model` and `choices[0]` are read."""

    model_config = ConfigDict(extra="allow")

    model: ModelName
    choices: list[CompletionChoice] = Field(min_length=1)
    # The backend configuration the completion ran on: a segment where no prompt version is
    # given (issue 40). Anything but a short text is ignored, as the rest of a completion is.
    system_fingerprint: Any = None


class AnswerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    external_id: ExternalId
    use_case: UseCaseSlug
    question: QuestionText
    answer: AnswerText | None = None
    model: ModelName | None = None
    chunks: list[ChunkIn] = Field(default_factory=list, max_length=MAX_CHUNKS)
    logprobs: Logprobs | None = None
    completion: Completion | None = None
    messages: list[dict[str, Any]] | None = Field(default=None, max_length=1000)
    created_at: IsoDateTime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    prompt_version: PromptVersion | None = Field(
        default=None, description="the RAG prompt's version, a segment (issue 40)"
    )

    @field_validator("chunks", "metadata", mode="before")
    @classmethod
    def _null_is_none_given(cls, value: Any, info: ValidationInfo) -> Any:
        # Many clients write null for an optional list or object they have nothing for.
        if value is None:
            return [] if info.field_name == "chunks" else {}
        return value

    @model_validator(mode="after")
    def _complete(self) -> "AnswerIn":
        if self.completion is not None:
            choice = self.completion.choices[0]
            if self.answer is None:
                if choice.message.content is None:
                    raise ValueError("completion: choices[0].message.content is empty")
                self.answer = choice.message.content
            if self.model is None:
                self.model = self.completion.model
            if self.logprobs is None:
                self.logprobs = choice.logprobs
            fingerprint = self.completion.system_fingerprint
            if (self.prompt_version is None and isinstance(fingerprint, str)
                    and 0 < len(fingerprint) <= 100 and fingerprint.isprintable()):
                self.prompt_version = fingerprint
        if self.answer is None:
            raise ValueError("answer: required unless completion is given")
        if self.model is None:
            raise ValueError("model: required unless completion is given")
        if self.created_at is not None:
            if timezone.is_naive(self.created_at):
                # A time without zone is read as UTC, the zone of most logs.
                self.created_at = self.created_at.replace(tzinfo=UTC)
            try:
                # Stored in UTC: 0001-01-01T00:00+14:00 is year 0 there (a 500 at insert).
                in_utc = self.created_at.astimezone(UTC)
            except OverflowError as e:
                raise ValueError("created_at: lies outside the years 1 to 9999 in UTC") from e
            offset = self.created_at.utcoffset()
            if offset is not None and abs(offset) >= timedelta(hours=16):
                # ISO 8601 allows offsets to ±23:59, PostgreSQL to ±15:59: the same instant in
                # UTC, rather than the database's "time zone displacement out of range".
                self.created_at = in_utc
            if self.created_at > timezone.now() + MAX_FUTURE:
                raise ValueError("created_at: lies more than a day in the future")
        try:
            check_json(self.metadata, MAX_METADATA_CHARS)
        except ValueError as e:
            raise ValueError(f"metadata: {e}") from e
        for field, message in metadata_problems(self.metadata, ()):
            raise ValueError(f"{field}: {message}")
        if self.messages is not None:
            try:
                check_json(self.messages, MAX_MESSAGES_CHARS)
            except ValueError as e:
                raise ValueError(f"messages: {e}") from e
        return self


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Items are validated one by one, so that one bad item cannot cost the others.
    answers: list[Any] = Field(max_length=MAX_BATCH)


class FieldError(BaseModel):
    field: str
    message: str


class ErrorOut(BaseModel):
    errors: list[FieldError]


class UncertainTokenOut(BaseModel):
    token: str
    probability: float
    position: int
    end: int


class AnswerOut(BaseModel):
    id: int
    external_id: str
    use_case: str
    created_at: datetime
    flagged: bool
    logprobs_status: str = Field(description="ok | none (no logprobs) | unaligned")
    uncertain_tokens: list[UncertainTokenOut]
    sampled: bool
    sample_reason: str = Field(description="flagged | random | not_sampled")
    inclusion_probability: float
    status: str
    warnings: list[str]


class ChunkOut(BaseModel):
    rank: int
    text: str
    id: str | None
    score: float | None
    source: str | None


class JudgeOut(BaseModel):
    model: str
    prompt_version: str
    finished_at: datetime | None


class ClaimOut(BaseModel):
    position: int
    text: str
    label: str = Field(description="GEDECKT | TEILWEISE | UNGEDECKT | UNPARSEABLE")


class OnDemandOut(BaseModel):
    score: float | None = Field(description="faithfulness 0..1 of the on-demand judgement")
    abstention: bool
    judge: JudgeOut
    claims: list[ClaimOut]


class AnswerDetailOut(AnswerOut):
    question: str
    answer: str
    model: str
    prompt_version: str | None = Field(
        default=None, description="the RAG prompt's version as sent (or the completion's "
        "system_fingerprint), else null"
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    chunks: list[ChunkOut]
    score: float | None = Field(description="faithfulness 0..1 once judged, else null")
    abstention: bool = Field(description="judged without claims (an honest 'I don't know')")
    judge: JudgeOut | None = Field(description="the judge run behind the score, once judged")
    claims: list[ClaimOut] = Field(description="the claims of the current judge run")
    error: str | None = Field(
        description="when status is failed: why (the reason of the answer's newest judge run)"
    )
    on_demand: OnDemandOut | None = Field(
        default=None,
        description=(
            "for an answer outside the sample that a team lead had judged on demand: the "
            "newest such verdict. It is not in the estimates, which rest on the sample: the "
            "answer's status stays not_sampled and its score null"
        ),
    )


class BatchItemOut(BaseModel):
    index: int
    status: int = Field(description="the HTTP status this item would have got on its own")
    answer: AnswerOut | None = Field(default=None, description="the record, on 200 and 201")
    errors: list[FieldError] | None = Field(default=None, description="on 4xx")


class BatchOut(BaseModel):
    results: list[BatchItemOut]
    created: int
    existing: int
    failed: int
