"""TEST-ONLY demo credentials of the venue twin: a public key pair, NEVER for real funds.

The private key below is the first development key of the Hardhat/Foundry tool chains: it is
printed in their documentation and known to everyone, so anything sent to its address on a
real chain is taken at once. The twin registers it by default so the daemon and the demos
run with no credentials at all; the real venue does not know this API key.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEMO_ADDRESS", "DEMO_API_KEY", "DEMO_PRIVATE_KEY"]

# TEST-ONLY. Publicly known key; never use it, or its address, for real funds.
DEMO_PRIVATE_KEY: Final = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
"""TEST-ONLY secp256k1 private key (public knowledge): never for real funds."""

DEMO_ADDRESS: Final = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
"""The EIP-55 address of DEMO_PRIVATE_KEY."""

DEMO_API_KEY: Final = "st_demo_twin_only_0000000000000000000000000"
"""TEST-ONLY API key the twin links to DEMO_ADDRESS; the real venue does not know it."""
