"""The fast way in for ingest bodies: msgspec decodes the token log-probabilities in C.

An answer's JSON is mostly its ~300 tokens, each with its bytes and its top alternatives.
Parsing all of that into Python objects (orjson) and validating the tokens one by one
(pydantic) was about half of the CPU an answer cost at ingest. Here msgspec decodes the body in
one pass, checks each token against the same rules as ``schemas.TokenLogprob`` without building
the alternatives it never reads, and hands the rest of the answer over as plain JSON values.

Pydantic (``schemas.AnswerIn``) stays the contract: every answer is still validated by it, with
the decoded tokens wrapped as ``CheckedTokens`` so that it does not check them twice. Whatever
msgspec refuses - malformed JSON, a token breaking a rule, an unknown field - returns None
here, and the caller parses that body the slow way (orjson or json, then pydantic), which names
every problem; so an error reads the same either way, and this path can only be faster, never
more lenient. ``tests/monitoring/test_decoding.py`` holds it to that.
"""

import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired, TypedDict, cast, overload

import msgspec
import numpy as np
import orjson
from msgspec import UNSET, Meta, UnsetType

from ingest.schemas import (
    MAX_BATCH,
    MAX_TOKEN_BYTES,
    MAX_TOKEN_CHARS,
    MAX_TOKENS,
    CheckedTokens,
    TokenLogprob,
)


class BodyError(Exception):
    """A body (or part of one) that is not JSON; the message names the problem, ``field`` the
    field it is in when it is known ("" for the body as a whole)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class Unreadable:
    """A batch item that is not JSON Treue can read (nested too deeply, a number of more
    digits than Python converts): the item's own 400, while the other items go on."""

    def __init__(self, error: BodyError) -> None:
        self.field = error.field
        self.message = str(error).replace("the body", "the item", 1)  # the value keeps its name


def parse(body: bytes, field: str = "") -> Any:
    """JSON the slow way: what the fast way refuses, and the parts it leaves as text (``field``
    names such a part in the error)."""
    try:
        # orjson is strict (no NaN, UTF-8 only) and several times faster than json; whatever
        # it refuses goes through json, which names the problem precisely.
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    what = "the value" if field else "the body"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyError(f"{what} is not valid UTF-8", field) from e
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError as e:
        raise BodyError(f"{what} is nested too deeply", field) from e
    except json.JSONDecodeError as e:
        raise BodyError(f"{what} is not valid JSON: {e.msg} at position {e.pos}", field) from e
    except BodyError as e:
        e.field = field
        raise
    except ValueError as e:  # Python converts integers of up to 4300 digits
        raise BodyError(f"{what} holds a number of more than 4300 digits", field) from e


def _reject_constant(name: str) -> Any:
    raise BodyError(f"{name} is not valid JSON")


_Byte = Annotated[int, Meta(ge=0, le=255)]


class _Token(TypedDict):
    # msgspec refuses floats out of range and ints for `bytes`, as pydantic's strict types do;
    # keys it does not know (top_logprobs among them) are skipped without being built.
    token: Annotated[str, Meta(max_length=MAX_TOKEN_CHARS)]
    logprob: Annotated[float, Meta(le=0)]
    bytes: NotRequired[Annotated[list[_Byte], Meta(max_length=MAX_TOKEN_BYTES)] | None]


class _Logprobs(msgspec.Struct):
    content: Annotated[list[_Token], Meta(max_length=MAX_TOKENS)] | None = None


class _Choice(msgspec.Struct):
    message: Any = UNSET
    logprobs: _Logprobs | None | UnsetType = UNSET


class _Completion(msgspec.Struct):
    # The rest of a ChatCompletion (id, usage, ...) is skipped: AnswerIn allows and ignores it.
    model: Any = UNSET
    choices: list[_Choice] | UnsetType = UNSET
    system_fingerprint: Any = UNSET  # a segment where no prompt version is given (issue 40)


class _Answer(msgspec.Struct, forbid_unknown_fields=True):
    # Everything but the tokens is left to pydantic. Where the value is free JSON or holds
    # numbers it is kept as text and parsed like the slow way parses it (msgspec reads
    # integers beyond 64 bits as floats, json keeps them exact).
    external_id: Any = UNSET
    use_case: Any = UNSET
    question: Any = UNSET
    answer: Any = UNSET
    model: Any = UNSET
    chunks: msgspec.Raw | UnsetType = UNSET
    logprobs: _Logprobs | None | UnsetType = UNSET
    completion: _Completion | None | UnsetType = UNSET
    messages: msgspec.Raw | UnsetType = UNSET
    created_at: Any = UNSET
    metadata: msgspec.Raw | UnsetType = UNSET
    prompt_version: Any = UNSET


_AS_TEXT = ("chunks", "messages", "metadata")


class _Batch(msgspec.Struct, forbid_unknown_fields=True):
    answers: Annotated[list[msgspec.Raw], Meta(max_length=MAX_BATCH)]


class _Answers(msgspec.Struct, forbid_unknown_fields=True):
    answers: Annotated[list[_Answer], Meta(max_length=MAX_BATCH)]


_answer_decoder = msgspec.json.Decoder(_Answer)
_answers_decoder = msgspec.json.Decoder(_Answers)
_batch_decoder = msgspec.json.Decoder(_Batch)


def _logprobs(value: _Logprobs | None) -> dict[str, Any] | None:
    if value is None:
        return None
    if value.content is None:
        return {"content": None}
    # The same keys as schemas.TokenLogprob, checked by msgspec against the same rules.
    return {"content": CheckedTokens(cast("list[TokenLogprob]", value.content))}


def _present(struct: msgspec.Struct) -> dict[str, Any]:
    return {
        name: getattr(struct, name)
        for name in struct.__struct_fields__
        if getattr(struct, name) is not UNSET
    }


def _completion(value: Any) -> Any:
    if not isinstance(value, _Completion):
        return value
    out = _present(value)
    if isinstance(value.choices, list):
        out["choices"] = []
        for choice in value.choices:
            item = _present(choice)
            if "logprobs" in item:
                # Present in `item`, so not UNSET: a _Logprobs or None.
                item["logprobs"] = _logprobs(choice.logprobs)  # type: ignore[arg-type]  # see above
            out["choices"].append(item)
    return out


def decode_answer(body: bytes) -> dict[str, Any] | None:
    """One answer's body as the input AnswerIn validates, its tokens already checked; None when
    the body must go the slow way. BodyError when a part left as text is not JSON."""
    try:
        decoded = _answer_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return None
    return _as_input(decoded)


def decode_batch(body: bytes) -> list[dict[str, Any]] | None:
    """Every item of a batch body as decode_answer gives it, in one pass over the body; None when
    the body or any item must go another way (then split_batch, and each item on its own, so
    that one bad item costs only itself), also when a part of an item is not JSON."""
    try:
        decoded = _answers_decoder.decode(body)
        return [_as_input(item) for item in decoded.answers]
    except (msgspec.DecodeError, RecursionError, BodyError):
        return None


def decode_item(item: bytes) -> dict[str, Any] | Any | Unreadable:
    """One item of a batch split by split_batch: decoded the fast way, else parsed (its errors
    then come from pydantic), or Unreadable when it is not JSON Treue can read."""
    try:
        answer = decode_answer(item)
        return answer if answer is not None else parse(item)
    except BodyError as e:
        return Unreadable(e)


def _as_input(decoded: _Answer) -> dict[str, Any]:
    out = _present(decoded)
    for name in _AS_TEXT:
        if name in out:
            out[name] = parse(bytes(out[name]), name)
    if "logprobs" in out:
        # Present in `out`, so not UNSET: a _Logprobs or None.
        out["logprobs"] = _logprobs(decoded.logprobs)  # type: ignore[arg-type]  # see above
    if "completion" in out:
        out["completion"] = _completion(decoded.completion)
    return out


def split_batch(body: bytes) -> list[bytes] | None:
    """The items of a batch body, each as its own JSON text; None when the body must go the
    slow way (not an object with nothing but `answers`, too many items, malformed JSON)."""
    try:
        return [bytes(item) for item in _batch_decoder.decode(body).answers]
    except msgspec.ValidationError:
        return None  # the envelope is wrong: the slow way names the problem
    except msgspec.DecodeError:
        return None
    except RecursionError:
        # msgspec refuses a body nested deeper than its limit even in an item it only skips:
        # one such item would cost the whole batch. Split without parsing, so it costs only
        # itself (its own parse then says it is nested too deeply).
        return _split_batch_flat(body)


def _split_batch_flat(body: bytes) -> list[bytes] | None:
    """`{"answers": [item, ...]}` split into its items' texts by counting brackets outside
    strings, whatever the items' depth; None unless the body is exactly that shape (the slow way
    then answers for the whole body). Items are not parsed here: a malformed one fails on its
    own. Vectorised, so that a 64 MB body of brackets costs about a second, not a Python loop
    over every token (memory: a few bytes per body byte, once)."""
    b = np.frombuffer(body, dtype=np.uint8)
    # The envelope: `{`, the key, `:`, `[`, the items, `]`, `}`; anything else goes the slow way.
    head = _ENVELOPE_HEAD.match(body)
    end = len(body.rstrip(_BLANK)) - 1
    if head is None or end < head.end() or body[end] != ord("}"):
        return None
    last = len(body[:end].rstrip(_BLANK)) - 1  # the array's `]`
    first = head.end()  # just after its `[`
    if last < first or body[last] != ord("]"):
        return None
    # A quote is escaped when an odd run of backslashes ends just before it; only the
    # backslashes' positions are needed to know which.
    quote = b == ord('"')
    slashes = np.flatnonzero(b == ord("\\"))
    if len(slashes):
        run_ends = np.flatnonzero(np.diff(slashes) != 1)
        ends = np.append(slashes[run_ends], slashes[-1])
        starts = np.insert(slashes[run_ends + 1], 0, slashes[0])
        escaped = ends[(ends - starts) % 2 == 0] + 1  # odd runs: the character after them
        quote[escaped[escaped < len(b)]] = False
    inside = np.logical_xor.accumulate(quote) | quote  # strings, their quotes included
    outside = ~inside
    step = (outside & ((b == ord("{")) | (b == ord("[")))).astype(np.int8)
    step -= (outside & ((b == ord("}")) | (b == ord("]")))).astype(np.int8)
    depth = np.cumsum(step, dtype=np.int32)
    del step
    if inside[-1] or depth[-1] != 0 or depth[first - 1] != 2 or depth[last] != 1:
        return None  # an unterminated string, unbalanced brackets, or more after the array
    inner = depth[first:last]
    if len(inner) and inner.min() < 2:
        return None  # the array closes before its `]`: something follows it
    if not body[first:last].strip(_BLANK):
        return []
    commas = np.flatnonzero(outside[first:last] & (b[first:last] == ord(",")) & (inner == 2))
    if len(commas) >= MAX_BATCH:
        return None
    bounds = [first, *(first + int(c) + 1 for c in commas), last + 1]
    items = [body[lo : hi - 1].strip(_BLANK) for lo, hi in zip(bounds, bounds[1:], strict=False)]
    return None if not all(items) else items


_ENVELOPE_HEAD = re.compile(rb'[ \t\r\n]*\{[ \t\r\n]*"answers"[ \t\r\n]*:[ \t\r\n]*\[')
_BLANK = b" \t\r\n"


class BatchItems(Sequence[bytes | None]):
    """The items of a batch body as sent, split from the body only when one is asked for: they
    are needed only to compare a replay with an answer stored under the old fingerprint. The
    body decoded, it splits; were it ever not to, each item reads as None (not known), which
    that comparison takes as no match rather than failing the request."""

    def __init__(self, body: bytes, count: int) -> None:
        self._body = body
        self._count = count
        self._items: list[bytes | None] | None = None

    def _split(self) -> list[bytes | None]:
        if self._items is None:
            split = split_batch(self._body)
            items: list[bytes | None] | None = list(split) if split is not None else None
            self._items = items if items and len(items) == self._count else [None] * self._count
        return self._items

    @overload
    def __getitem__(self, index: int) -> bytes | None: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes | None]: ...

    def __getitem__(self, index: int | slice) -> bytes | None | list[bytes | None]:
        return self._split()[index]

    def __len__(self) -> int:
        return self._count
