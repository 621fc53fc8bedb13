"""Service API keys: generated once, shown once, stored only as a hash.

A key looks like `tr_<prefix>_<secret>`. The prefix is stored in the clear so a key can be found
and recognised in lists; the whole key is stored as SHA-256. Keys carry 256 random bits, so a
fast hash is enough (a slow password hash protects low-entropy secrets, which these are not).
"""

import hashlib
import hmac
import secrets

KEY_SCHEME = "tr"
PREFIX_CHARS = 8


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def generate_key() -> tuple[str, str, str]:
    """Return (key, prefix, hash) for a new key."""
    prefix = secrets.token_hex(PREFIX_CHARS // 2)
    key = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    return key, prefix, hash_key(key)


def key_prefix(key: str) -> str | None:
    """The prefix of a well-formed key, else None."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_SCHEME or len(parts[1]) != PREFIX_CHARS:
        return None
    return parts[1]


def key_matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), stored_hash)
