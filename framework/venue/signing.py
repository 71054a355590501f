"""Request signing for the venue's three sign types, and the matching server-side checks.

Sign type 2 (the default) is secp256k1 ECDSA over the Ethereum personal-message digest
(EIP-191 version 0x45); 1 is HMAC-SHA256; 3 is Ed25519. Sans-I/O: no sockets, no clock.

cffi is a declared dependency because type 2 signing is faster with it: pycryptodome binds
its C code through cffi when cffi is installed and through ctypes otherwise, and only the
cffi binding lets keccak256 skip the public wrapper. Measured per signature (median of 12
alternating runs in two fresh venvs, with and without cffi): a 20-order batchCreate body of
3.5 KB 52.3 -> 48.6 us, a query string 40.9 -> 36.0 us (keccak256 alone 17.2 -> 13.1 us and
5.7 -> 2.1 us). Left undeclared, that speed-up would come and go with whatever else happened
to be installed. The secp256k1 fast path uses coincurve's own compiled binding, cffi or not.
"""

from __future__ import annotations

import hmac
import importlib
import re
from collections.abc import Callable
from typing import Any, Final, Protocol, runtime_checkable

from coincurve import PrivateKey, PublicKey
from Crypto.Hash import keccak
from Crypto.Signature import eddsa

__all__ = [
    "SIGN_TYPE_ED25519",
    "SIGN_TYPE_HMAC",
    "SIGN_TYPE_SECP256K1",
    "Ed25519Signer",
    "HmacSigner",
    "Secp256k1Signer",
    "Signer",
    "address_of",
    "checksum_address",
    "make_signer",
    "personal_message_digest",
    "recover_address",
    "verify_ed25519",
    "verify_hmac",
]

SIGN_TYPE_HMAC: Final = 1
"""X-SAPI-SIGN-TYPE value for HMAC-SHA256."""
SIGN_TYPE_SECP256K1: Final = 2
"""X-SAPI-SIGN-TYPE value for secp256k1 personal-message signatures (the venue's default)."""
SIGN_TYPE_ED25519: Final = 3
"""X-SAPI-SIGN-TYPE value for Ed25519."""

_PERSONAL_PREFIX: Final = b"\x19Ethereum Signed Message:\n"
# Order of the secp256k1 group: valid private keys are 1..n-1.
_SECP256K1_N: Final = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
# v = 27 + recovery id; libsecp256k1 may in theory return 0..3 (2 and 3 need r >= n, ~2**-127).
_V_HEX: Final = ("1b", "1c", "1d", "1e")
_HEX32: Final = re.compile(r"(?:0[xX])?([0-9a-fA-F]{64})")
_HEX64: Final = re.compile(r"(?:0[xX])?([0-9a-fA-F]{128})")
_HEX65: Final = re.compile(r"(?:0[xX])?([0-9a-fA-F]{130})")


@runtime_checkable
class Signer(Protocol):
    """Signs the venue's text to sign; sign_type is the X-SAPI-SIGN-TYPE value."""

    @property
    def sign_type(self) -> int:
        """The X-SAPI-SIGN-TYPE header value for this signer."""
        ...

    def sign(self, text: str) -> str:
        """Return the signature header value for text."""
        ...


def _public_keccak256(data: bytes) -> bytes:
    """Keccak-256 (the Ethereum hash, not SHA3-256) of data, through pycryptodome's public API."""
    return keccak.new(digest_bits=256, data=data).digest()


def _public_digest_signer(key: PrivateKey) -> Callable[[bytes], str]:
    """Return a function signing a 32-byte digest with key, through coincurve's public API."""
    sign_recoverable = key.sign_recoverable

    def sign_digest(digest: bytes) -> str:
        sig = sign_recoverable(digest, hasher=None)  # r(32) || s(32) || recid(1)
        return "0x" + sig[:64].hex() + _V_HEX[sig[64]]

    return sign_digest


# The fast paths below call the same C functions as the public wrappers above, minus the
# wrappers' per-call Python overhead: about 4 to 5 us of a 36 to 52 us signature, see the
# module docstring (tests/benchmarks/bench_signing.py; --public-api measures without them).
# They reach into pycryptodome's and coincurve's cffi bindings, which are not public API,
# so each is loaded defensively, checked against its public twin at import, and replaced
# by the public twin if anything is missing or disagrees. Both are thread-safe.


def _load_fast_keccak256() -> Callable[[bytes], bytes] | None:
    """Return keccak256 over pycryptodome's raw cffi binding, or None if unavailable."""
    try:
        raw_api: Any = importlib.import_module("Crypto.Util._raw_api")
        if raw_api.backend != "cffi":  # cffi is declared: ctypes means it failed to load
            return None
        lib: Any = keccak._raw_keccak_lib  # type: ignore[attr-defined]
        ffi = raw_api.ffi
        new, buffer = ffi.new, ffi.buffer
        reset, absorb, digest = lib.keccak_reset, lib.keccak_absorb, lib.keccak_digest
        # Hash states are reused, since allocating one costs as much as hashing 500 bytes.
        # list.pop and list.append are atomic, so each thread takes a state of its own.
        pool: list[tuple[Any, Any]] = []

        def fresh_state() -> tuple[Any, Any]:
            holder = new("void *[1]")
            # Capacity 64 bytes and 24 rounds make Keccak-256.
            if lib.keccak_init(holder, 64, 24):
                raise RuntimeError("keccak_init failed")
            return ffi.gc(holder[0], lib.keccak_destroy), new("uint8_t[32]")

        def fast_keccak256(data: bytes) -> bytes:
            try:
                state, out = pool.pop()
            except IndexError:
                state, out = fresh_state()
            try:
                # Padding byte 0x01 is Keccak's (SHA3-256 would use 0x06).
                if reset(state) or absorb(state, data, len(data)) or digest(state, out, 32, 1):
                    raise RuntimeError("keccak failed")
                return buffer(out)[:]  # type: ignore[no-any-return]
            finally:
                pool.append((state, out))

        # Two different inputs in turn, so a state reused from the pool is checked too.
        for probe in (b"\x00probe" * 40, b"probe"):
            if fast_keccak256(probe) != _public_keccak256(probe):
                return None
    except Exception:
        # Any change in the private binding means "use the public API", never "fail".
        return None
    return fast_keccak256


def _load_fast_digest_signer() -> Callable[[PrivateKey], Callable[[bytes], str]] | None:
    """Return a digest-signer factory over coincurve's cffi binding, or None if unavailable."""
    try:
        binding: Any = importlib.import_module("coincurve._libsecp256k1")
        ffi, lib = binding.ffi, binding.lib
        new, buffer, null = ffi.new, ffi.buffer, ffi.NULL
        sign_recoverable = lib.secp256k1_ecdsa_sign_recoverable
        serialize = lib.secp256k1_ecdsa_recoverable_signature_serialize_compact

        # Output buffers are reused through an atomic pop/append pool, as for keccak.
        pool: list[tuple[Any, Any, Any]] = []

        def factory(key: PrivateKey) -> Callable[[bytes], str]:
            ctx, secret = key.context.ctx, key.secret

            def sign_digest(digest: bytes) -> str:
                try:
                    buffers = pool.pop()
                except IndexError:
                    buffers = (
                        new("secp256k1_ecdsa_recoverable_signature *"),
                        new("unsigned char[64]"),
                        new("int *"),
                    )
                sig, rs, recid = buffers
                try:
                    # Null nonce function = libsecp256k1's RFC 6979 default, as in coincurve.
                    if not sign_recoverable(ctx, sig, digest, secret, null, null):
                        raise RuntimeError("secp256k1 signing failed")
                    serialize(ctx, rs, recid, sig)
                    rs_bytes: bytes = buffer(rs)[:]
                    return "0x" + rs_bytes.hex() + _V_HEX[recid[0]]
                finally:
                    pool.append(buffers)

            return sign_digest

        probe_key = PrivateKey(bytes(31) + b"\x07")
        probe = _public_keccak256(b"probe")
        if factory(probe_key)(probe) != _public_digest_signer(probe_key)(probe):
            return None
    except Exception:
        # Any change in the private binding means "use the public API", never "fail".
        return None
    return factory


_keccak256: Callable[[bytes], bytes] = _load_fast_keccak256() or _public_keccak256
_digest_signer: Callable[[PrivateKey], Callable[[bytes], str]] = (
    _load_fast_digest_signer() or _public_digest_signer
)


def personal_message_digest(text: str) -> bytes:
    """Return the EIP-191 personal-message keccak256 digest of text's UTF-8 bytes."""
    m = text.encode("utf-8")
    return _keccak256(_PERSONAL_PREFIX + str(len(m)).encode("ascii") + m)


def checksum_address(raw20: bytes) -> str:
    """Return the EIP-55 mixed-case 0x address of a 20-byte account id."""
    if len(raw20) != 20:
        raise ValueError(f"an address is 20 bytes, got {len(raw20)}")
    lower = raw20.hex()
    nibbles = _keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(
        c.upper() if n >= "8" else c for c, n in zip(lower, nibbles, strict=False)
    )


def _address_of_public_key(public_key: PublicKey) -> str:
    """Return the checksummed address of a secp256k1 public key."""
    # Address = last 20 bytes of keccak256 of the 64-byte uncompressed point (no 0x04 tag).
    return checksum_address(_keccak256(public_key.format(compressed=False)[1:])[12:])


def _parse_private_key(private_key_hex: str) -> bytes:
    """Return the 32 key bytes, or raise ValueError whose text never contains the key."""
    if not isinstance(private_key_hex, str):
        raise TypeError("secp256k1 private key must be a hex str")
    match = _HEX32.fullmatch(private_key_hex)
    if match is None:
        raise ValueError(
            "secp256k1 private key must be 64 hex characters, optionally 0x-prefixed "
            f"(got a string of {len(private_key_hex)} characters)"
        )
    raw = bytes.fromhex(match.group(1))
    if not 0 < int.from_bytes(raw, "big") < _SECP256K1_N:
        raise ValueError("secp256k1 private key is out of range (must be in 1..n-1)")
    return raw


class Secp256k1Signer:
    """Sign type 2: secp256k1 ECDSA over the personal-message digest, 0x r||s||v hex."""

    __slots__ = ("_address", "_sign_digest")

    def __init__(self, private_key_hex: str) -> None:
        """Load a 0x-prefixed or bare 64-hex-character private key."""
        key = PrivateKey(_parse_private_key(private_key_hex))
        self._sign_digest = _digest_signer(key)
        self._address = _address_of_public_key(key.public_key)

    @property
    def sign_type(self) -> int:
        """Always 2."""
        return SIGN_TYPE_SECP256K1

    @property
    def address(self) -> str:
        """EIP-55 checksummed 0x address of the key."""
        return self._address

    def sign(self, text: str) -> str:
        """Return "0x" + r + s + v as 132 lower-case hex characters, v in {27, 28}."""
        m = text.encode("utf-8")
        return self._sign_digest(_keccak256(_PERSONAL_PREFIX + str(len(m)).encode("ascii") + m))

    def __repr__(self) -> str:
        """Show the type and address only, never the key."""
        return f"Secp256k1Signer(address={self._address!r})"


class HmacSigner:
    """Sign type 1: "0x" + hex HMAC-SHA256 of the UTF-8 text, keyed by the secret's UTF-8 bytes."""

    __slots__ = ("_key",)

    def __init__(self, secret: str) -> None:
        """Keep the secret's UTF-8 bytes as the HMAC key."""
        if not isinstance(secret, str):
            raise TypeError("HMAC secret must be a str")
        if not secret:
            raise ValueError("HMAC secret must not be empty")
        self._key = secret.encode("utf-8")

    @property
    def sign_type(self) -> int:
        """Always 1."""
        return SIGN_TYPE_HMAC

    def sign(self, text: str) -> str:
        """Return "0x" + the 64-character hex HMAC-SHA256 of text."""
        return "0x" + hmac.digest(self._key, text.encode("utf-8"), "sha256").hex()

    def __repr__(self) -> str:
        """Show the type only: an HMAC secret has no public part."""
        return "HmacSigner(<secret hidden>)"


def _parse_ed25519_seed(secret: str) -> bytes:
    """Return the 32-byte seed, or raise ValueError whose text never contains the seed."""
    if not isinstance(secret, str):
        raise TypeError("Ed25519 secret must be a hex str")
    match = _HEX32.fullmatch(secret)
    if match is None:
        raise ValueError(
            "Ed25519 secret must be a 32-byte seed as 64 hex characters, optionally "
            f"0x-prefixed (got a string of {len(secret)} characters)"
        )
    return bytes.fromhex(match.group(1))


class Ed25519Signer:
    """Sign type 3: RFC 8032 Ed25519 signature of the UTF-8 text, 0x-prefixed hex."""

    __slots__ = ("_public_key_hex", "_scheme")

    def __init__(self, secret: str) -> None:
        """Load a 32-byte seed written as 0x-prefixed or bare hex."""
        key = eddsa.import_private_key(_parse_ed25519_seed(secret))
        self._scheme = eddsa.new(key, "rfc8032")
        self._public_key_hex: str = "0x" + key.public_key().export_key(format="raw").hex()

    @property
    def sign_type(self) -> int:
        """Always 3."""
        return SIGN_TYPE_ED25519

    @property
    def public_key_hex(self) -> str:
        """The 32-byte public key as "0x" + 64 lower-case hex characters."""
        return self._public_key_hex

    def sign(self, text: str) -> str:
        """Return "0x" + the 64-byte signature as lower-case hex."""
        signature: bytes = self._scheme.sign(text.encode("utf-8"))
        return "0x" + signature.hex()

    def __repr__(self) -> str:
        """Show the type and public key only, never the seed."""
        return f"Ed25519Signer(public_key={self._public_key_hex!r})"


_SIGNER_TYPES: Final[dict[int, type[Secp256k1Signer | HmacSigner | Ed25519Signer]]] = {
    SIGN_TYPE_HMAC: HmacSigner,
    SIGN_TYPE_SECP256K1: Secp256k1Signer,
    SIGN_TYPE_ED25519: Ed25519Signer,
}


def make_signer(sign_type: int, secret: str) -> Signer:
    """Return the signer for an X-SAPI-SIGN-TYPE value (1, 2 or 3) and its secret."""
    cls = None if isinstance(sign_type, bool) else _SIGNER_TYPES.get(sign_type)
    if cls is None:
        raise ValueError(
            f"unsupported sign_type {sign_type!r}; accepted values are "
            "1 (HMAC-SHA256), 2 (secp256k1), 3 (Ed25519)"
        )
    return cls(secret)


def address_of(private_key_hex: str) -> str:
    """Return the EIP-55 checksummed address of a secp256k1 private key."""
    return Secp256k1Signer(private_key_hex).address


def recover_address(text: str, signature: str) -> str | None:
    """Return the address that signed text (type 2), or None if the signature is unusable."""
    if not isinstance(signature, str) or not isinstance(text, str):
        return None
    match = _HEX65.fullmatch(signature)
    if match is None:
        return None
    raw = bytes.fromhex(match.group(1))
    v = raw[64]
    if v not in (27, 28):
        return None
    try:
        digest = personal_message_digest(text)  # raises on lone surrogates in text
        public_key = PublicKey.from_signature_and_message(
            raw[:64] + bytes((v - 27,)), digest, hasher=None
        )
    except Exception:
        # coincurve reports an unparsable or unrecoverable signature with assorted errors.
        return None
    return _address_of_public_key(public_key)


def verify_hmac(secret: str, text: str, signature: str) -> bool:
    """Check a type 1 signature in constant time; 0x prefix optional, hex case ignored."""
    if not isinstance(signature, str) or not isinstance(secret, str) or not isinstance(text, str):
        return False
    match = _HEX32.fullmatch(signature)
    if match is None:
        return False
    try:
        expected = hmac.digest(secret.encode("utf-8"), text.encode("utf-8"), "sha256")
    except UnicodeEncodeError:  # lone surrogates: no UTF-8 form, so nothing was signed
        return False
    return hmac.compare_digest(expected, bytes.fromhex(match.group(1)))


def verify_ed25519(public_key_hex: str, text: str, signature: str) -> bool:
    """Check a type 3 signature against a 32-byte public key given as (0x-)hex."""
    if not isinstance(public_key_hex, str) or not isinstance(signature, str):
        return False
    if not isinstance(text, str):
        return False
    key_match = _HEX32.fullmatch(public_key_hex)
    sig_match = _HEX64.fullmatch(signature)
    if key_match is None or sig_match is None:
        return False
    try:
        key = eddsa.import_public_key(bytes.fromhex(key_match.group(1)))
        eddsa.new(key, "rfc8032").verify(text.encode("utf-8"), bytes.fromhex(sig_match.group(1)))
    except ValueError:
        # Not a point on the curve, a text with no UTF-8 form, or a signature that fails.
        return False
    return True
