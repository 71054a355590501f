"""Who is calling: API-key lookup, signature verification for sign types 1-3, timestamp window.

Decisions where SPEC.md is silent (VENUE-FACTS.md fills the rest):

* The sign type comes from ``X-SAPI-SIGN-TYPE`` (REST) or ``signType`` (WebSocket, ``"2"``
  or ``2``); when absent the configured default (2) applies.
* Sign type 2 recovers the address from the signature once per candidate text and compares
  it, case-insensitively, with the account's address; 1 checks an HMAC-SHA256 hex digest; 3
  an Ed25519 signature. Hex is accepted with ``0x``/``0X`` and in either case.
* The caller passes every text that may have been signed (the raw query string and its
  percent-decoded form); the first that verifies wins.
* A missing or unknown API key, a missing signature, an unsupported sign type and a signature
  that does not verify are all refusals (:class:`AuthRefused`, HTTP 401), as are an API key
  or a signature that is not a string (a WebSocket message may carry any JSON value). Reasons
  name what was wrong, never a secret, a signature or the key itself.
* :meth:`Verifier.precheck` makes every check that needs no signed text, so a REST body (the
  signed text of batchCreate) is read only when its signature could verify.
* Timestamps are milliseconds as decimal text (an integer is tolerated); the window is
  symmetric, ``|now - timestamp| <= window``.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from framework.venue.signing import recover_address, verify_ed25519, verify_hmac

__all__ = [
    "AuthRefused",
    "Credentials",
    "Verifier",
    "parse_sign_type",
    "parse_timestamp",
    "within_window",
]


@attrs.frozen(slots=True, kw_only=True)
class Credentials:
    """What the twin knows of one API client: its user id and verification material."""

    user_id: int
    api_key: str = attrs.field(repr=False)
    address: str | None = None
    hmac_secret: str | None = attrs.field(default=None, repr=False)
    ed25519_public_key: str | None = None

    @property
    def address_lower(self) -> str | None:
        """The address in lower case, for comparisons."""
        return self.address.lower() if self.address is not None else None


class AuthRefused(Exception):
    """Authentication failed; the message is a reason safe to show the caller."""


def parse_sign_type(value: object, default: int) -> int | None:
    """The sign type of a header or message value ("2" or 2), default when absent, else None."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value in (1, 2, 3) else None
    if isinstance(value, str) and value.strip() in ("1", "2", "3"):
        return int(value.strip())
    return None


class Verifier:
    """Looks up API keys and verifies signatures; one instance per twin."""

    def __init__(self, *, default_sign_type: int = 2) -> None:
        """Start with no accounts; default_sign_type applies when the caller gives none."""
        self._by_key: dict[str, Credentials] = {}
        self.default_sign_type = default_sign_type

    def add(self, credentials: Credentials) -> None:
        """Register (or replace) the credentials of one API key."""
        self._by_key[credentials.api_key] = credentials

    def lookup(self, api_key: str) -> Credentials | None:
        """The credentials of an API key, or None."""
        return self._by_key.get(api_key)

    def authenticate(
        self,
        api_key: object,
        sign_type: object,
        signature: object,
        texts: Iterable[str],
    ) -> Credentials:
        """The caller's credentials when one of texts verifies, else raise AuthRefused.

        api_key and signature may be anything a WebSocket message carried: what is not a
        string is refused as such, never looked up.
        """
        credentials, kind, key, signature_text = self._usable(api_key, sign_type, signature)
        if kind == 2:
            expected = key.lower()
            for text in texts:
                recovered = recover_address(text, signature_text)
                if recovered is not None and recovered.lower() == expected:
                    return credentials
        elif kind == 1:
            if any(verify_hmac(key, text, signature_text) for text in texts):
                return credentials
        elif any(verify_ed25519(key, text, signature_text) for text in texts):
            return credentials
        raise AuthRefused("signature does not verify")

    def precheck(self, api_key: object, sign_type: object, signature: object) -> Credentials:
        """Every check that needs no signed text: the key, the signature's presence, the type.

        The caller's credentials when a signature of this type could verify for this key,
        else raise AuthRefused. REST runs it before reading a body (whose bytes are the
        signed text), so the body of a request that cannot verify is never read.
        """
        return self._usable(api_key, sign_type, signature)[0]

    def _usable(
        self, api_key: object, sign_type: object, signature: object
    ) -> tuple[Credentials, int, str, str]:
        """(credentials, sign type, the key registered for that type, signature) or refuse."""
        if api_key is None or api_key == "":
            raise AuthRefused("missing APIKEY")
        if not isinstance(api_key, str):
            raise AuthRefused("APIKEY is not a string")
        credentials = self._by_key.get(api_key)
        if credentials is None:
            raise AuthRefused("unknown APIKEY")
        if signature is None or signature == "":
            raise AuthRefused("missing signature")
        if not isinstance(signature, str):
            raise AuthRefused("signature is not a string")
        kind = parse_sign_type(sign_type, self.default_sign_type)
        if kind is None:
            raise AuthRefused("unsupported sign type")
        key = {
            1: credentials.hmac_secret,
            2: credentials.address,
            3: credentials.ed25519_public_key,
        }[kind]
        if key is None:
            raise AuthRefused(f"no key registered for sign type {kind}")
        return credentials, kind, key, signature


def parse_timestamp(value: object) -> int | None:
    """Milliseconds from decimal text (or an integer), None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


def within_window(timestamp_ms: int, now_ms: int, window_ms: int) -> bool:
    """True when the timestamp is at most window_ms away from now, either side."""
    return abs(now_ms - timestamp_ms) <= window_ms
