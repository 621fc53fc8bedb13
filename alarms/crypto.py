"""Encrypting the channels' secrets at rest: their addresses (a Slack or Teams webhook address
is the credential itself) and the generic webhooks' signing secrets.

Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`), with the keys of
TREUE_ALARM_CHANNEL_KEYS (the first encrypts, every one decrypts, so a key can be rotated), or
else one derived from SECRET_KEY by HKDF.
"""

from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretUnreadable(Exception):
    """A stored secret that no configured key opens (SECRET_KEY or the keys changed)."""


@functools.cache
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    if not keys:
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"treue alarm channels"
        ).derive(secret_key.encode("utf-8"))
        keys = (base64.urlsafe_b64encode(derived).decode("ascii"),)
    try:
        return MultiFernet([Fernet(k) for k in keys])
    except ValueError as e:
        raise ImproperlyConfigured(
            "TREUE_ALARM_CHANNEL_KEYS: each key must be a Fernet key (32 url-safe base64-encoded "
            "bytes)"
        ) from e


def _current() -> MultiFernet:
    return _fernet(tuple(settings.TREUE_ALARM_CHANNEL_KEYS), settings.SECRET_KEY)


def encrypt(text: str) -> str:
    return _current().encrypt(text.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _current().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError) as e:
        raise SecretUnreadable("no configured key opens this channel's stored secret") from e
