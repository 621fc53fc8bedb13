"""The WSGI environ extras the tests hand Django's test client (its `**extra`), as a TypedDict:
unpacked into `client.get(path, **extra)`, a plain `dict[str, str]` could as well fill the
client's own parameters (`data`, `follow`, `secure`), and mypy says so."""

from typing import TypedDict


class Environ(TypedDict, total=False):
    HTTP_AUTHORIZATION: str
    HTTP_CONTENT_ENCODING: str
    HTTP_USER_AGENT: str
    HTTP_X_FORWARDED_FOR: str
    HTTP_X_REAL_IP: str


def bearer(key: str | None) -> Environ:
    """The key as a bearer token; no header at all without a key."""
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
