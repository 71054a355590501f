"""Which pair a market frame naming none belongs to: its contractPairId, as the venue lists it.

A kline names no pair, only its ``contractPairId`` (VENUE-FACTS "Market data"). With one pair
subscribed to an event, a pairless frame of that event is that pair's. With several, the
frame's ``contractPairId`` is looked up in the venue's pair list (``/api/third/info/pairs``,
read once per session until read: each entry's name and id, read leniently as
:mod:`framework.venue.public_info` reads the rules). A frame whose id is absent, mixed or not
listed is never guessed: :meth:`PairOf.of` answers None and the stream refuses the frame,
counted as ``unattributable``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from framework.venue.public_info import MAX_PAIRS, PAIRS_PATH
from framework.venue.requests import parse_envelope

__all__ = ["PAIR_ID_KEYS", "PairOf", "listed_pair_ids"]

PAIR_ID_KEYS: Final = ("contractPairId", "contract_pair_id", "pairId")
"""Where a frame's records and the pair list's entries carry a pair's id."""
_NAME_KEYS: Final = ("pairName", "pair", "symbol", "contractPairName", "name")
_LIST_KEYS: Final = ("list", "records", "rows", "pairs", "data")


def _entries(data: Any) -> list[Mapping[str, Any]]:
    """The pair objects of a pair list's data (a list, or one under a list key), bounded."""
    if isinstance(data, Mapping):
        data = next((data[k] for k in _LIST_KEYS if isinstance(data.get(k), list)), None)
    if not isinstance(data, list):
        return []
    return [item for item in data[:MAX_PAIRS] if isinstance(item, Mapping)]


def _pair_id(item: Mapping[str, Any]) -> int | None:
    """An object's pair id (an int, or an integral numeric string), else None."""
    for key in PAIR_ID_KEYS:
        value = item.get(key)
        if type(value) is int:
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    return None


def listed_pair_ids(status: int, body: bytes) -> dict[int, str]:
    """Pair id -> name, from an answer of the pair list; raises as parse_envelope does."""
    out: dict[int, str] = {}
    for item in _entries(parse_envelope(status, body).data):
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
        pair_id = _pair_id(item)
        if name and pair_id is not None:
            out.setdefault(pair_id, name)
    return out


class PairOf:
    """The pair of a frame naming none: by its event's only pair, else by its pair id."""

    PATH: Final = PAIRS_PATH

    def __init__(self, subscribed: Iterable[tuple[str, str]]) -> None:
        by_event: dict[str, set[str]] = {}
        for event, pair in subscribed:
            by_event.setdefault(event, set()).add(pair)
        self._only = {event: next(iter(p)) for event, p in by_event.items() if len(p) == 1}
        self.shared = sorted(event for event, p in by_event.items() if len(p) > 1)
        """Events subscribed for more than one pair: their pairless frames need the ids."""
        self.pairs = {pair for p in by_event.values() for pair in p}
        self.ids: dict[int, str] = {}
        """Pair id -> pair, for the subscribed pairs the venue's list names."""

    @property
    def needs_ids(self) -> bool:
        """True while some event is shared by several pairs and no id is known."""
        return bool(self.shared) and not self.ids

    def learn(self, listed: Mapping[int, str]) -> None:
        """Keep the ids of the subscribed pairs from the venue's pair list."""
        self.ids = {i: name for i, name in listed.items() if name in self.pairs}

    def of(self, message: str | bytes) -> str | None:
        """The pair a frame belongs to, or None when nothing says which (never guessed)."""
        try:
            frame = orjson.loads(message)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(frame, dict):
            return None
        only = self._only.get(frame.get("event"))  # type: ignore[arg-type]
        if only is not None:
            return only
        data = frame.get("data")
        items = data if isinstance(data, list) else [data]
        ids = {_pair_id(item) if isinstance(item, dict) else None for item in items}
        if len(ids) != 1:
            return None
        (pair_id,) = ids
        return self.ids.get(pair_id) if pair_id is not None else None
