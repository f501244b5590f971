"""The one place credentials are removed: every message, manifest field, card string and stream passes here.

What counts as a credential:

* the user-info part of any URL (``https://user:password@host`` -> ``https://***@host``);
* Hugging Face tokens (``hf_...``) and ``Bearer``/``Authorization`` header values;
* the value of any environment variable whose name looks secret (``*_TOKEN``, ``*_API_KEY``, ``*_KEY``,
  ``*_SECRET``, ``*PASSWORD*``, ``*_PAT``, ``*CREDENTIAL*``) and is at least 6 characters long,
  wherever it appears, plus the user-info of URLs held in any environment variable;
* the known secrets of the run: every key a command read, whatever the variable's name
  (:func:`register_secret`; e.g. ``blind --api-key-env NAME``).

:func:`scrub` works on text, :func:`redact` also says whether anything was removed, :func:`scrub_obj` on JSON-like structures, :func:`secret_values` lists the
exact byte strings that must never reach an output (used by the output-folder check in
:mod:`audit_hub.hub.folders`), and :class:`ScrubbingStream` wraps ``sys.stdout``/``sys.stderr`` in the CLI.
"""

from __future__ import annotations

import os
import re
from typing import Any

MASK = "***"
_SECRET_NAME = re.compile(r"(TOKEN|API_?KEY|_KEY$|^KEY$|SECRET|PASSWORD|PASSWD|_PAT$|CREDENTIAL)", re.I)
_NOT_SECRET_NAMES = {"TOKENIZERS_PARALLELISM", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "SSH_AUTH_SOCK"}
_MIN_SECRET_LEN = 6

# scheme://user[:password]@host -> scheme://***@host (any scheme, user-info up to the first '@' before
# the host part; no '/', whitespace or quotes inside user-info).
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,30}://)(?P<info>[^\s/@'\"<>]+)@")
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{6,}")
_AUTH_HEADER = re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key)(\s*[:=]\s*)"
                          r"(?:(bearer|basic|token)\s+)?[^\s,;'\"]+")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_-]{16,}|ghp_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
                      r"|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})")


def is_secret_name(name: str) -> bool:
    return name not in _NOT_SECRET_NAMES and bool(_SECRET_NAME.search(name))


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Exact strings that must never be written or printed, longest first."""
    env = os.environ if environ is None else environ
    vals: set[str] = set()
    for k, v in env.items():
        if not v:
            continue
        if is_secret_name(k) and len(v) >= _MIN_SECRET_LEN:
            vals.add(v)
        for m in _URL_USERINFO.finditer(v):
            info = m.group("info")
            if ":" in info:  # the password alone, and the whole user:password
                pw = info.split(":", 1)[1]
                if len(pw) >= 4:
                    vals.add(pw)
            if len(info) >= 4:
                vals.add(info)
    try:  # the cached Hub token, if any (never read when HF_TOKEN is set: it was added above)
        from huggingface_hub.constants import HF_TOKEN_PATH

        if os.path.isfile(HF_TOKEN_PATH) and os.path.getsize(HF_TOKEN_PATH) < 4096:
            with open(HF_TOKEN_PATH, encoding="utf-8", errors="replace") as fh:
                t = fh.read().strip()
            if len(t) >= _MIN_SECRET_LEN:
                vals.add(t)
    except Exception:  # noqa: BLE001 - no cache, unreadable cache, no huggingface_hub: nothing to add
        pass
    return sorted(vals, key=len, reverse=True)


_cache: tuple[tuple, list[str]] | None = None
_RUN_SECRETS: set[str] = set()


def register_secret(value: str | None) -> None:
    """Add a secret this run read (an API key from the variable the user named) to the known secrets:
    from now on it is removed from every text, stream and file like an environment secret. Values shorter
    than 6 characters (``EMPTY`` for a server without authentication) are not secrets."""
    if isinstance(value, str) and len(value) >= _MIN_SECRET_LEN:
        _RUN_SECRETS.add(value)


def _current_secrets() -> list[str]:
    global _cache
    key = tuple(sorted((k, v) for k, v in os.environ.items() if v and (is_secret_name(k) or "@" in v)))
    key = (key, tuple(sorted(_RUN_SECRETS)))
    if _cache is None or _cache[0] != key:
        _cache = (key, sorted(set(secret_values()) | _RUN_SECRETS, key=len, reverse=True))
    return _cache[1]


def scrub(text: Any, _secrets: list[str] | None = None) -> Any:
    """``text`` with every credential replaced by ``***`` (non-strings are returned unchanged).
    ``_secrets``: the current secret values, when the caller already looked them up."""
    if not isinstance(text, str) or not text:
        return text
    for v in _current_secrets() if _secrets is None else _secrets:
        if v in text:
            text = text.replace(v, MASK)
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    text = _HF_TOKEN.sub("hf_" + MASK, text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _KEYLIKE.sub(MASK, text)
    return text


def known_secrets() -> list[str]:
    """Every secret value of this run: the environment's (:func:`secret_values`) and the registered ones."""
    return list(_current_secrets())


def redact(text: Any) -> tuple[Any, bool]:
    """``(scrub(text), whether anything was removed)``: for answers, whose redactions are counted."""
    clean = scrub(text)
    return clean, isinstance(text, str) and clean != text


def scrub_obj(obj: Any, _secrets: list[str] | None = None) -> Any:
    """Scrub every string (keys included) in a JSON-like structure (the environment is read once)."""
    sec = _current_secrets() if _secrets is None else _secrets
    if isinstance(obj, str):
        return scrub(obj, sec)
    if isinstance(obj, dict):
        return {scrub(k, sec) if isinstance(k, str) else k: scrub_obj(v, sec) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub_obj(v, sec) for v in obj]
    return obj


def find_secret(data: bytes) -> str | None:
    """The name of the environment variable whose secret value occurs in ``data`` (None if none)."""
    for v in _current_secrets():
        b = v.encode("utf-8", "surrogatepass")
        if b and b in data:
            for k, val in os.environ.items():
                if val == v or (v in val and "@" in val):
                    return k
            return "a stored Hub token"
    return None


def find_secret_in_file(path, chunk: int = 8 << 20) -> str | None:
    """:func:`find_secret` over a file, streamed in chunks (overlapping by the longest secret)."""
    secrets = [v.encode("utf-8", "surrogatepass") for v in _current_secrets()]
    if not secrets:
        return None
    overlap = max(len(s) for s in secrets)
    tail = b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                return None
            found = find_secret(tail + block)
            if found:
                return found
            tail = (tail + block)[-overlap:]


class ScrubbingStream:
    """A text stream wrapper that scrubs everything written through it (``sys.stdout``/``sys.stderr``)."""

    def __init__(self, inner):
        self._inner = inner

    def write(self, s: str) -> int:
        self._inner.write(scrub(s))
        return len(s)

    def writelines(self, lines) -> None:
        for s in lines:
            self.write(s)

    def __getattr__(self, name: str):
        if name == "buffer":  # no raw byte path around the scrubber
            raise AttributeError(name)
        return getattr(self._inner, name)


__all__ = ["MASK", "scrub", "redact", "register_secret", "known_secrets", "scrub_obj", "secret_values", "find_secret", "find_secret_in_file", "is_secret_name",
           "ScrubbingStream"]
