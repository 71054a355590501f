"""Signatures per second: Secp256k1Signer.sign against eth-account's sign_message.

Run: python tests/benchmarks/bench_signing.py [--public-api]. Both sign the same texts, in alternating
rounds so that machine noise hits both alike; the figure is the median round. The target
is Secp256k1Signer at >= 5x eth-account's rate on every kind of text. The first line printed
says which path each step takes: --public-api forces the public wrappers, and a venv without cffi
shows what that declared dependency gives (pycryptodome then binds through ctypes, which
also slows eth-account's keccak, so compare the signatures per second, not only the ratio).
"""

from __future__ import annotations

import hashlib
import importlib
import statistics
import sys
import time
from collections.abc import Callable

import orjson
from eth_account import Account
from eth_account.messages import encode_defunct

from framework.venue import signing
from framework.venue.signing import Secp256k1Signer

TARGET_RATIO = 5.0
ROUNDS = 9
TEXTS_PER_KIND = 50
# A throwaway key derived from a fixed string: deterministic runs, no real funds.
PRIVATE_KEY = "0x" + hashlib.sha256(b"perpframe bench_signing").hexdigest()


def batch_create_body(timestamp_ms: int) -> str:
    """A 20-order batchCreate body, compact, keys in the public SDK's order."""
    orders = [
        {
            "clientOrderId": f"pf-{timestamp_ms}-{i:04d}",
            "isLong": i % 2 == 0,
            "isMarket": False,
            "lever": 10,
            "matchType": 1,
            "pairName": "ETH-USD",
            "positionType": 4,
            "price": f"{3500 + i * 0.25:.2f}",
            "quantity": "0.125",
        }
        for i in range(20)
    ]
    return orjson.dumps({"orders": orders, "timestamp": str(timestamp_ms)}).decode()


def query_string(timestamp_ms: int) -> str:
    """A match-result query string, names in ascending order."""
    return f"matchId=881234567&pageNo=1&pageSize=50&pairName=ETH-USD&timestamp={timestamp_ms}"


def rate(sign: Callable[[str], object], texts: list[str], calls: int) -> float:
    """Time `calls` signatures cycling over texts; return signatures per second."""
    batch = (texts * (calls // len(texts) + 1))[:calls]
    start = time.perf_counter()
    for text in batch:
        sign(text)
    return calls / (time.perf_counter() - start)


def main(argv: list[str]) -> int:
    """Run the benchmark, print the table, return 0 if every ratio meets the target."""
    if "--public-api" in argv:
        # Measure what coincurve's and pycryptodome's public wrappers alone would give.
        signing._keccak256 = signing._public_keccak256
        signing._digest_signer = signing._public_digest_signer
    signer = Secp256k1Signer(PRIVATE_KEY)

    def eth_sign(text: str) -> object:
        return Account.sign_message(encode_defunct(text=text), PRIVATE_KEY)

    base = 1_718_000_000_000
    kinds = {
        "batchCreate body (20 orders)": [
            batch_create_body(base + i) for i in range(TEXTS_PER_KIND)
        ],
        "query string": [query_string(base + i) for i in range(TEXTS_PER_KIND)],
    }
    # Same bytes out of both, or the comparison means nothing.
    for texts in kinds.values():
        for text in texts[:5]:
            signed = Account.sign_message(encode_defunct(text=text), PRIVATE_KEY)
            theirs = "0x" + signed.signature.hex().removeprefix("0x")  # hexbytes>=1 drops 0x
            assert signer.sign(text) == theirs, "signatures differ from eth-account"

    backend = importlib.import_module("Crypto.Util._raw_api").backend
    keccak_path = (
        "fast (cffi binding)"
        if signing._keccak256 is not signing._public_keccak256
        else f"public API over {backend}"
    )
    digest_path = (
        "fast (coincurve binding)"
        if signing._digest_signer is not signing._public_digest_signer
        else "public API"
    )
    print(f"python {sys.version.split()[0]}; keccak256 {keccak_path}; secp256k1 {digest_path}")
    print(f"{ROUNDS} alternating rounds, median shown\n")
    header = (
        f"{'text':<30} {'bytes':>6} {'Secp256k1Signer/s':>18} {'eth-account/s':>14} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    ok = True
    for name, texts in kinds.items():
        ours: list[float] = []
        eths: list[float] = []
        for _ in range(ROUNDS):
            ours.append(rate(signer.sign, texts, 2000))
            eths.append(rate(eth_sign, texts, 400))
        ours_rate, eth_rate = statistics.median(ours), statistics.median(eths)
        ratio = ours_rate / eth_rate
        ok &= ratio >= TARGET_RATIO
        size = statistics.median(len(t.encode()) for t in texts)
        print(f"{name:<30} {size:>6.0f} {ours_rate:>18,.0f} {eth_rate:>14,.0f} {ratio:>6.2f}x")
    verdict = "meets it on every" if ok else "MISSES it on at least one"
    print(f"\nTarget >= {TARGET_RATIO:.0f}x: Secp256k1Signer {verdict} kind of text.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
