"""Service API keys (monitoring.domain.keys): plain Python, no Django."""

import hashlib
import re

import pytest

from monitoring.domain.keys import (
    KEY_SCHEME,
    PREFIX_CHARS,
    generate_key,
    hash_key,
    key_matches,
    key_prefix,
)

KEY_RE = re.compile(rf"^{KEY_SCHEME}_[0-9a-f]{{{PREFIX_CHARS}}}_[A-Za-z0-9_-]{{43}}$")


def test_generated_key_format():
    key, prefix, digest = generate_key()
    assert KEY_RE.match(key), key
    assert key.startswith(f"{KEY_SCHEME}_{prefix}_")
    assert len(prefix) == PREFIX_CHARS
    assert digest == hashlib.sha256(key.encode()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    # the hash never contains the key
    assert key not in digest


def test_generated_keys_are_unique():
    generated = [generate_key() for _ in range(200)]
    assert len({k for k, _, _ in generated}) == 200
    assert len({p for _, p, _ in generated}) > 190  # 32 bits of prefix: collisions are rare


def test_prefix_of_generated_key():
    key, prefix, _ = generate_key()
    assert key_prefix(key) == prefix


# (id, key, expected prefix)
PREFIX_CASES = [
    ("well formed", "tr_abcd1234_secret", "abcd1234"),
    ("secret may hold underscores", "tr_abcd1234_se_cr_et", "abcd1234"),
    ("empty secret still parses", "tr_abcd1234_", "abcd1234"),
    ("empty", "", None),
    ("no underscores", "tr", None),
    ("one part missing", "tr_abcd1234", None),
    ("wrong scheme", "sk_abcd1234_secret", None),
    ("upper-case scheme", "TR_abcd1234_secret", None),
    ("prefix too short", "tr_abc_secret", None),
    ("prefix too long", "tr_abcd12345_secret", None),
    ("empty prefix", "tr__secret", None),
    ("spaces", "tr abcd1234 secret", None),
    ("leading space", " tr_abcd1234_secret", None),
]


@pytest.mark.parametrize(
    ("key", "expected"), [c[1:] for c in PREFIX_CASES], ids=[c[0] for c in PREFIX_CASES]
)
def test_key_prefix(key, expected):
    assert key_prefix(key) == expected


def test_key_matches_true_for_own_hash():
    key, _, digest = generate_key()
    assert key_matches(key, digest) is True


@pytest.mark.parametrize(
    "mutate",
    [
        lambda k: k[:-1] + ("A" if k[-1] != "A" else "B"),  # last char changed
        lambda k: k + "x",  # extra char
        lambda k: k[:-1],  # truncated
        lambda k: k.upper(),
        lambda k: " " + k,
        lambda k: "",
    ],
    ids=["changed", "extended", "truncated", "upper", "leading space", "empty"],
)
def test_key_matches_false_for_other_keys(mutate):
    key, _, digest = generate_key()
    assert key_matches(mutate(key), digest) is False


def test_key_matches_false_against_another_keys_hash():
    key, _, _ = generate_key()
    _, _, other_digest = generate_key()
    assert key_matches(key, other_digest) is False


@pytest.mark.parametrize("key", ["tr_\ud800\ud800\ud800_x", "\x00", "tr_abcd1234_\udfff"])
def test_odd_strings_hash_without_error(key):
    # headers can carry anything; hashing must never raise
    assert len(hash_key(key)) == 64
    assert key_matches(key, hash_key(key)) is True
    assert key_matches(key, "0" * 64) is False
