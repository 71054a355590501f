"""Client order ids: short, venue-safe, unique across restarts and processes sharing a journal.

A generated id is ``{node}{tag}-{seq:x}``: the node name (configured, ``[A-Za-z0-9]``, up to
10 characters), a tag naming the id space and a sequence number in lower-case hex. With a
journal the tag is a random word the journal drew once when it was created and the sequence
numbers come from blocks the journal reserves atomically, so two processes sharing a journal
never draw the same number and a restart never reuses one; a journal deleted and created
again draws a new tag, so its ids cannot collide with the old ones at the venue. Without a
journal the tag is the start time in base 36 plus random bits (both passed in).

An id a strategy supplies itself must match ``[A-Za-z0-9_-]{1,32}``, must not start with the
node name (that space belongs to generated ids) and must not have been used before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, Protocol

__all__ = [
    "MAX_CLIENT_ID_LENGTH",
    "ClientIdError",
    "ClientIdGenerator",
    "IdSource",
    "base36",
    "check_client_order_id",
    "generated_by",
]

MAX_CLIENT_ID_LENGTH: Final = 32
"""The longest client order id the framework sends."""

_VALID_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
_VALID_NODE: Final = re.compile(r"[A-Za-z0-9]{1,10}")
_VALID_TAG: Final = re.compile(r"[a-z0-9]{0,12}")
_DIGITS: Final = "0123456789abcdefghijklmnopqrstuvwxyz"


class ClientIdError(ValueError):
    """A client order id that is malformed, in the generated space, or already used."""


class IdSource(Protocol):
    """Where sequence numbers come from: the journal (shared by processes) or memory."""

    def id_tag(self) -> str:
        """A short lower-case word naming this id space (drawn once, kept)."""
        ...

    def reserve_ids(self, count: int) -> int:
        """Reserve count consecutive sequence numbers atomically; return the first."""
        ...


def base36(value: int) -> str:
    """A non-negative integer in lower-case base 36."""
    if value < 0:
        raise ValueError("base36 of a negative number")
    if value == 0:
        return "0"
    out = []
    while value:
        value, digit = divmod(value, 36)
        out.append(_DIGITS[digit])
    return "".join(reversed(out))


def check_client_order_id(client_order_id: str) -> None:
    """Raise ClientIdError unless the id is 1-32 characters of [A-Za-z0-9_-]."""
    if not isinstance(client_order_id, str) or _VALID_ID.fullmatch(client_order_id) is None:
        raise ClientIdError(
            f"client_order_id {client_order_id!r}: expected 1 to {MAX_CLIENT_ID_LENGTH} "
            "characters of A-Z, a-z, 0-9, '_' and '-'"
        )


class _MemorySource:
    """An id space that lives in one process: a tag passed in and a counter from zero."""

    __slots__ = ("_next", "_tag")

    def __init__(self, tag: str) -> None:
        self._tag = tag
        self._next = 0

    def id_tag(self) -> str:
        return self._tag

    def reserve_ids(self, count: int) -> int:
        first = self._next
        self._next += count
        return first


class ClientIdGenerator:
    """Draws client order ids ``{node}{tag}-{seq:x}`` from an IdSource, a block at a time."""

    __slots__ = ("_block", "_end", "_next", "_prefix", "_source", "chosen", "node")

    def __init__(self, node: str, source: IdSource, *, block_size: int = 1000) -> None:
        if not isinstance(node, str) or _VALID_NODE.fullmatch(node) is None:
            raise ClientIdError(f"node {node!r}: expected 1 to 10 characters of A-Z, a-z, 0-9")
        tag = source.id_tag()
        if _VALID_TAG.fullmatch(tag) is None:
            raise ClientIdError(f"id tag {tag!r}: expected up to 12 characters of a-z, 0-9")
        if block_size < 1:
            raise ValueError("block_size must be at least 1")
        self.node = node
        self._source = source
        self._prefix = f"{node}{tag}-"
        self._block = block_size
        self._next = 0
        self._end = 0
        self.chosen: set[str] = set()
        """Ids strategies chose and used (without a journal; with one, those recovery read)."""

    @classmethod
    def ephemeral(cls, node: str, *, now_ms: int, random_bits: int) -> ClientIdGenerator:
        """A generator without a journal: tag = start time (base 36) + 20 random bits."""
        tag = base36(now_ms)[-8:] + base36(random_bits & 0xFFFFF).rjust(4, "0")
        return cls(node, _MemorySource(tag))

    @property
    def prefix(self) -> str:
        """What every generated id starts with."""
        return self._prefix

    def __repr__(self) -> str:
        return f"ClientIdGenerator(prefix={self._prefix!r})"

    def next(self) -> str:
        """A fresh id (at most 32 characters)."""
        seq = self._next
        if seq >= self._end:
            seq = self._source.reserve_ids(self._block)
            self._end = seq + self._block
        self._next = seq + 1
        return f"{self._prefix}{seq:x}"

    def claim(self, client_order_id: str, journaled: Callable[[str], bool] | None) -> None:
        """Check a strategy's own id (check_user_id) and that it was never used: by the
        journal (``journaled``) when there is one, else by the ids claimed so far."""
        self.check_user_id(client_order_id)
        # In memory either way: the journal loads the chosen ids it holds once, when opened,
        # and notes every one added since (journal.add runs for accepted and refused intents).
        if journaled is not None:
            used = journaled(client_order_id)
        else:
            used = client_order_id in self.chosen
            self.chosen.add(client_order_id)
        if used:
            raise ClientIdError(f"client_order_id {client_order_id!r} was already used")

    def check_user_id(self, client_order_id: str) -> None:
        """Raise ClientIdError if a strategy's own id is malformed or in the generated space."""
        check_client_order_id(client_order_id)
        if client_order_id.startswith(self.node):
            raise ClientIdError(
                f"client_order_id {client_order_id!r}: ids starting with the node name "
                f"{self.node!r} are reserved for generated ids"
            )


def generated_by(node: str, client_order_id: str) -> bool:
    """True when the id has the form a journal of this node generates: ``{node}{tag}-{hex}``
    with the journal's 5-character tag (another node whose name starts with this one's, or
    an id some other program chose, does not)."""
    if not client_order_id.startswith(node):
        return False
    rest = client_order_id[len(node) :]
    return _JOURNAL_ID.fullmatch(rest) is not None


_JOURNAL_ID: Final = re.compile(r"[a-z0-9]{5}-[0-9a-f]+")
