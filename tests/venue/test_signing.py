"""Tests for framework.venue.signing: the three sign types and their server-side checks."""

from __future__ import annotations

import hashlib
import hmac
import importlib
import threading

import pytest
from coincurve import PrivateKey
from Crypto.Hash import keccak
from eth_account import Account
from eth_account.messages import defunct_hash_message, encode_defunct
from eth_keys.backends.native.main import NativeECCBackend
from eth_keys.main import KeyAPI
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.venue import signing
from framework.venue.signing import (
    Ed25519Signer,
    HmacSigner,
    Secp256k1Signer,
    Signer,
    address_of,
    checksum_address,
    make_signer,
    personal_message_digest,
    recover_address,
    verify_ed25519,
    verify_hmac,
)

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
KEY_HEX = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
OTHER_KEY_HEX = "0x" + "11" * 32
ED25519_SEED_HEX = "0x" + "5a" * 32

keys = st.binary(min_size=32, max_size=32).filter(
    lambda b: 0 < int.from_bytes(b, "big") < SECP256K1_N
)
texts = st.text()


def eth_account_signature(text: str, key: bytes | str) -> str:
    """eth-account's signature as 0x-prefixed lower-case hex (hexbytes 1.x drops the 0x)."""
    signed = Account.sign_message(encode_defunct(text=text), key)
    return "0x" + str(signed.signature.hex()).removeprefix("0x").lower()


@settings(max_examples=200, deadline=None)
@given(text=texts, key=keys)
def test_secp256k1_signature_equals_eth_account(text: str, key: bytes) -> None:
    assert Secp256k1Signer(key.hex()).sign(text) == eth_account_signature(text, key)


@settings(max_examples=50, deadline=None)
@given(text=texts, key=keys)
def test_secp256k1_signature_equals_pure_python_rfc6979(text: str, key: bytes) -> None:
    # eth-account signs through coincurve when it is installed; eth-keys' native backend is
    # an independent RFC 6979 + ECDSA implementation, so the nonce is checked for real.
    native = KeyAPI(NativeECCBackend).PrivateKey(key)
    sig = native.sign_msg_hash(bytes(defunct_hash_message(text=text)))
    expected = "0x" + sig.to_bytes()[:64].hex() + format(27 + sig.v, "02x")
    assert Secp256k1Signer("0x" + key.hex()).sign(text) == expected


def test_secp256k1_signature_of_known_vector() -> None:
    signature = Secp256k1Signer(OTHER_KEY_HEX).sign("héllo")
    assert signature == (
        "0x8315460f1ca6ef1ef3c413a25fc3ec1430314995691cbe6c6ba5e3156d58d419"
        "7edd283ef0b981cb635cc48808087d2120a535095d9c2eada4e2397570c828c01b"
    )


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_secp256k1_signature_format(text: str) -> None:
    signature = Secp256k1Signer(KEY_HEX).sign(text)
    assert len(signature) == 132
    assert signature.startswith("0x")
    assert signature == signature.lower()
    assert int(signature[130:], 16) in (27, 28)


def test_secp256k1_signature_is_deterministic() -> None:
    signer = Secp256k1Signer(KEY_HEX)
    assert signer.sign("pageNo=1&timestamp=1718000000000") == signer.sign(
        "pageNo=1&timestamp=1718000000000"
    )


def test_secp256k1_signature_differs_per_text() -> None:
    signer = Secp256k1Signer(KEY_HEX)
    assert signer.sign("timestamp=1") != signer.sign("timestamp=2")


@settings(max_examples=100, deadline=None)
@given(key=keys)
def test_address_equals_eth_account(key: bytes) -> None:
    assert Secp256k1Signer(key.hex()).address == Account.from_key(key).address


@settings(max_examples=50, deadline=None)
@given(key=keys)
def test_address_of_equals_eth_account(key: bytes) -> None:
    assert address_of("0x" + key.hex()) == Account.from_key(key).address


def test_key_accepted_with_and_without_prefix() -> None:
    assert Secp256k1Signer(KEY_HEX).address == Secp256k1Signer(KEY_HEX[2:].upper()).address


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_personal_message_digest_equals_eth_account(text: str) -> None:
    assert personal_message_digest(text) == bytes(defunct_hash_message(text=text))


@pytest.mark.parametrize(
    "address",
    [
        # The test vectors of EIP-55 itself.
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    ],
)
def test_checksum_address_matches_eip55_vectors(address: str) -> None:
    assert checksum_address(bytes.fromhex(address[2:])) == address


def test_checksum_address_rejects_wrong_length() -> None:
    with pytest.raises(ValueError, match="20 bytes"):
        checksum_address(bytes(19))


@pytest.mark.parametrize(
    "bad_key",
    [
        "",
        "0x",
        "ab" * 31,
        "ab" * 33,
        "0x" + "g" * 64,
        " " + "ab" * 32,
        "ab" * 32 + "\n",
        "0x" + "0" * 64,
        "0x" + format(SECP256K1_N, "064x"),
        "0x" + "f" * 64,
        "0x" + "١" * 64,
    ],
)
def test_secp256k1_signer_rejects_malformed_key_without_echoing_it(bad_key: str) -> None:
    with pytest.raises(ValueError, match="secp256k1 private key") as excinfo:
        Secp256k1Signer(bad_key)
    message = str(excinfo.value)
    body = bad_key.strip().removeprefix("0x")
    assert not body or body not in message


@settings(max_examples=100, deadline=None)
@given(text=texts, key=keys)
def test_recover_address_round_trip(text: str, key: bytes) -> None:
    signer = Secp256k1Signer(key.hex())
    assert recover_address(text, signer.sign(text)) == signer.address


def test_recover_address_accepts_bare_upper_case_hex() -> None:
    signer = Secp256k1Signer(KEY_HEX)
    signature = signer.sign("timestamp=1718000000000")
    assert recover_address("timestamp=1718000000000", signature[2:].upper()) == signer.address


def test_recover_address_of_other_text_is_another_address() -> None:
    signer = Secp256k1Signer(KEY_HEX)
    signature = signer.sign("timestamp=1718000000000")
    assert recover_address("timestamp=1718000000001", signature) != signer.address


@pytest.mark.parametrize(
    "signature",
    [
        "",
        "0x",
        "garbage",
        "0x1234",
        "0x" + "ab" * 64,
        "0x" + "ab" * 66,
        "0x" + "zz" * 65,
        "0x" + "ab" * 64 + "1",
        " 0x" + "ab" * 64 + "1b",
        "0x" + "١" * 130,
        "0x" + "00" * 64 + "1b",
        "0x" + "ff" * 64 + "1b",
    ],
)
def test_recover_address_none_for_malformed_signature(signature: str) -> None:
    assert recover_address("timestamp=1718000000000", signature) is None


@pytest.mark.parametrize("v", ["00", "01", "1d", "1e", "ff"])
def test_recover_address_none_for_wrong_v(v: str) -> None:
    signature = Secp256k1Signer(KEY_HEX).sign("timestamp=1718000000000")
    assert recover_address("timestamp=1718000000000", signature[:130] + v) is None


def test_recover_address_none_for_non_str_signature() -> None:
    assert recover_address("timestamp=1", b"\x00" * 65) is None  # type: ignore[arg-type]


def test_recover_address_none_for_text_without_utf8_form() -> None:
    signature = Secp256k1Signer(KEY_HEX).sign("x")
    assert recover_address("\ud800", signature) is None


well_formed_signatures = st.builds(
    lambda rs, v: "0x" + rs.hex() + format(v, "02x"),
    st.binary(min_size=64, max_size=64),
    st.sampled_from([27, 28]),
)


@settings(max_examples=200, deadline=None)
@given(text=texts, signature=st.one_of(st.text(), well_formed_signatures))
def test_recover_address_never_raises(text: str, signature: str) -> None:
    result = recover_address(text, signature)
    assert result is None or (result.startswith("0x") and len(result) == 42)


@settings(max_examples=100, deadline=None)
@given(secret=st.text(min_size=1), text=texts)
def test_hmac_signature_equals_independent_hmac(secret: str, text: str) -> None:
    expected = hmac.new(secret.encode("utf-8"), text.encode("utf-8"), hashlib.sha256).hexdigest()
    assert HmacSigner(secret).sign(text) == "0x" + expected


def test_hmac_signature_matches_rfc4231_vector() -> None:
    # RFC 4231, test case 2.
    assert HmacSigner("Jefe").sign("what do ya want for nothing?") == (
        "0x5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )


def test_hmac_signer_rejects_empty_secret() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        HmacSigner("")


@settings(max_examples=100, deadline=None)
@given(secret=st.text(min_size=1), text=texts)
def test_verify_hmac_accepts_own_signature(secret: str, text: str) -> None:
    assert verify_hmac(secret, text, HmacSigner(secret).sign(text))


def test_verify_hmac_accepts_bare_upper_case_hex() -> None:
    signature = HmacSigner("s3cret").sign("timestamp=1")
    assert verify_hmac("s3cret", "timestamp=1", signature[2:].upper())


def test_verify_hmac_rejects_tampered_text() -> None:
    signature = HmacSigner("s3cret").sign("timestamp=1")
    assert not verify_hmac("s3cret", "timestamp=2", signature)


def test_verify_hmac_rejects_wrong_secret() -> None:
    signature = HmacSigner("s3cret").sign("timestamp=1")
    assert not verify_hmac("other", "timestamp=1", signature)


@pytest.mark.parametrize("signature", ["", "0x", "0x12", "0x" + "zz" * 32, "0x" + "é" * 64])
def test_verify_hmac_rejects_malformed_signature(signature: str) -> None:
    assert not verify_hmac("s3cret", "timestamp=1", signature)


def test_ed25519_signature_matches_rfc8032_vector() -> None:
    # RFC 8032 section 7.1, test 1 (empty message).
    signer = Ed25519Signer("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    assert signer.public_key_hex == (
        "0xd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    )
    assert signer.sign("") == (
        "0xe5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_ed25519_round_trip(text: str) -> None:
    signer = Ed25519Signer(ED25519_SEED_HEX)
    signature = signer.sign(text)
    assert len(signature) == 130
    assert verify_ed25519(signer.public_key_hex, text, signature)


def test_ed25519_rejects_tampered_text() -> None:
    signer = Ed25519Signer(ED25519_SEED_HEX)
    signature = signer.sign("timestamp=1718000000000")
    assert not verify_ed25519(signer.public_key_hex, "timestamp=1718000000001", signature)


def test_ed25519_rejects_other_key() -> None:
    signature = Ed25519Signer(ED25519_SEED_HEX).sign("timestamp=1")
    other = Ed25519Signer("0x" + "a5" * 32).public_key_hex
    assert not verify_ed25519(other, "timestamp=1", signature)


@pytest.mark.parametrize(
    ("public_key", "signature"),
    [
        ("0x12", "0x" + "00" * 64),
        ("0x" + "ff" * 32, "0x" + "00" * 64),
        ("good", "0x"),
        ("good", "0x" + "zz" * 64),
        ("good", "0x" + "00" * 64),
    ],
)
def test_verify_ed25519_rejects_malformed_input(public_key: str, signature: str) -> None:
    if public_key == "good":
        public_key = Ed25519Signer(ED25519_SEED_HEX).public_key_hex
    assert not verify_ed25519(public_key, "timestamp=1", signature)


def test_ed25519_signer_rejects_malformed_seed_without_echoing_it() -> None:
    with pytest.raises(ValueError, match="Ed25519 secret") as excinfo:
        Ed25519Signer("5a" * 31)
    assert "5a" * 31 not in str(excinfo.value)


@pytest.mark.parametrize(
    ("sign_type", "secret", "cls"),
    [
        (1, "s3cret", HmacSigner),
        (2, KEY_HEX, Secp256k1Signer),
        (3, ED25519_SEED_HEX, Ed25519Signer),
    ],
)
def test_make_signer_builds_each_sign_type(sign_type: int, secret: str, cls: type) -> None:
    signer = make_signer(sign_type, secret)
    assert isinstance(signer, cls)
    assert isinstance(signer, Signer)
    assert signer.sign_type == sign_type


@pytest.mark.parametrize("sign_type", [0, 4, 5, True])
def test_make_signer_rejects_unknown_sign_type(sign_type: int) -> None:
    with pytest.raises(ValueError, match=rf"sign_type {sign_type!r}.*1 .*2 .*3 ") as excinfo:
        make_signer(sign_type, KEY_HEX)
    assert KEY_HEX[2:] not in str(excinfo.value)


def test_secp256k1_repr_shows_address_not_key() -> None:
    signer = Secp256k1Signer(KEY_HEX)
    for text in (repr(signer), str(signer)):
        assert KEY_HEX[2:] not in text.lower()
        assert signer.address in text


def test_hmac_repr_hides_secret() -> None:
    signer = HmacSigner("a-very-secret-hmac-key")
    for text in (repr(signer), str(signer)):
        assert "a-very-secret-hmac-key" not in text
        assert "HmacSigner" in text


def test_ed25519_repr_shows_public_key_not_seed() -> None:
    signer = Ed25519Signer(ED25519_SEED_HEX)
    for text in (repr(signer), str(signer)):
        assert ED25519_SEED_HEX[2:] not in text.lower()
        assert signer.public_key_hex in text


@pytest.mark.parametrize(
    "signer",
    [Secp256k1Signer(KEY_HEX), HmacSigner("s3cret"), Ed25519Signer(ED25519_SEED_HEX)],
    ids=["secp256k1", "hmac", "ed25519"],
)
def test_signers_have_no_instance_dict(signer: Signer) -> None:
    assert not hasattr(signer, "__dict__")


def test_fast_paths_are_active() -> None:
    # What a fresh install gives: cffi is a declared dependency, so pycryptodome binds through
    # it and both fast paths load. A dependency upgrade that breaks the private bindings
    # silently falls back to the public API, and this test says so.
    assert importlib.import_module("Crypto.Util._raw_api").backend == "cffi"
    assert signing._keccak256 is not signing._public_keccak256
    assert signing._digest_signer is not signing._public_digest_signer


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=5000))
def test_fast_keccak_equals_public_keccak(data: bytes) -> None:
    assert signing._keccak256(data) == signing._public_keccak256(data)


@settings(max_examples=100, deadline=None)
@given(key=keys, digest=st.binary(min_size=32, max_size=32))
def test_fast_digest_signer_equals_public_digest_signer(key: bytes, digest: bytes) -> None:
    private_key = PrivateKey(key)
    fast = signing._digest_signer(private_key)(digest)
    assert fast == signing._public_digest_signer(private_key)(digest)


def test_signing_from_many_threads_matches_sequential_signing() -> None:
    signer = Secp256k1Signer(KEY_HEX)
    texts_ = [f"pageNo={i}&timestamp=1718000000000" + "x" * (i % 300) for i in range(400)]
    expected = [signer.sign(text) for text in texts_]
    results: dict[int, list[str]] = {}

    def work(worker: int) -> None:
        results[worker] = [signer.sign(text) for text in texts_]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[i] == expected for i in range(4))


def test_fast_keccak_loader_falls_back_when_binding_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(keccak, "_raw_keccak_lib")
    assert signing._load_fast_keccak256() is None


def test_fast_digest_signer_loader_falls_back_when_binding_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> None:
        raise ImportError(name)

    monkeypatch.setattr(importlib, "import_module", missing)
    assert signing._load_fast_digest_signer() is None
