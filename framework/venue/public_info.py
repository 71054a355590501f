"""The venue's public info calls (VENUE-FACTS "Market data"): server time and pair list, sans-I/O.

Both are unsigned GETs without parameters whose answer is the usual envelope. Their ``data``
shapes are not published, so they are read leniently:

* time: ``data`` is the server time in ms (VENUE-FACTS), as a number or a numeric string,
  or an object holding it under ``time``, ``serverTime``, ``timestamp`` or ``now``. A value
  below 10^11 is taken as seconds.
* pairs: a list of objects (or an object holding such a list under ``list``, ``records``,
  ``rows``, ``pairs`` or ``data``, or an object keyed by pair name). A pair's name is its
  ``pairName``, ``pair``, ``symbol``, ``contractPairName`` or ``name``; its rules are the
  fields of :class:`~framework.venue.rules.PairRules` it carries, under the camelCase or the
  snake_case of their names. A value that does not read as its rule's type is left out, so
  a rule is compared only when the venue states it readably.

HTTP 404 raises :class:`~framework.venue.errors.ExtensionUnavailable` (the venue does not
offer the path); anything else that is not an envelope with code 200 raises as
:func:`~framework.venue.requests.parse_envelope` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import attrs

from framework.venue.codec import DEFAULT_CODEC, Codec
from framework.venue.errors import BadResponse, ExtensionUnavailable
from framework.venue.requests import PreparedRequest, excerpt, parse_envelope

__all__ = [
    "MAX_PAIRS",
    "PAIRS_PATH",
    "RULE_FIELDS",
    "TIME_PATH",
    "PairListing",
    "parse_pair_list",
    "parse_server_time",
    "public_request",
]

TIME_PATH: Final = "/api/third/info/time"
PAIRS_PATH: Final = "/api/third/info/pairs"
MAX_PAIRS: Final = 10_000
"""Pairs read from one answer at most (the rest is ignored)."""

RULE_FIELDS: Final[dict[str, type]] = {
    "price_decimals": int,
    "quantity_decimals": int,
    "min_quantity": Decimal,
    "max_quantity": Decimal,
    "min_lever": int,
    "max_lever": int,
    "max_one_way_quantity": Decimal,
    "max_total_quantity": Decimal,
    "min_notional": Decimal,
    "trading": bool,
    "settle_coin": str,
}
"""The PairRules fields a pair list may state, with the type each is read as."""

_NAME_KEYS: Final = ("pairName", "pair", "symbol", "contractPairName", "name")
_LIST_KEYS: Final = ("list", "records", "rows", "pairs", "data")
_TIME_KEYS: Final = ("time", "serverTime", "timestamp", "now")


@attrs.frozen(slots=True)
class PairListing:
    """One pair as the venue lists it: its name and the rules it states (PairRules names)."""

    name: str
    rules: dict[str, int | Decimal | bool | str]


def public_request(path: str) -> PreparedRequest:
    """An unsigned GET of a public path (no parameters, no credentials)."""
    return PreparedRequest("GET", path, "", b"", {}, "")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _data(path: str, status: int, body: bytes, codec: Codec) -> Any:
    if status == 404:
        raise ExtensionUnavailable(path, "HTTP 404", http_status=404)
    return parse_envelope(status, body, codec).data


def _bad(path: str, status: int, body: bytes, what: str) -> BadResponse:
    return BadResponse(
        f"{path}: {what}: {excerpt(body)!r}", http_status=status, excerpt=excerpt(body)
    )


def parse_server_time(status: int, body: bytes, codec: Codec = DEFAULT_CODEC) -> int:
    """The venue's time in ms from an answer of TIME_PATH (see the module for the shapes)."""
    data = _data(TIME_PATH, status, body, codec)
    if isinstance(data, Mapping):
        data = next((data[k] for k in _TIME_KEYS if k in data), None)
    value = _number(data)
    if value is None or value <= 0:
        raise _bad(TIME_PATH, status, body, "no server time in the answer")
    return int(value * 1000) if value < 10**11 else int(value)


def _number(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = Decimal(str(value).strip()[:40])
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _entries(data: Any) -> list[tuple[str | None, Mapping[str, Any]]]:
    """(name from a key, object) of each pair object in data, in the venue's order."""
    if isinstance(data, Mapping):
        inner = next((data[k] for k in _LIST_KEYS if isinstance(data.get(k), list)), None)
        if inner is not None:
            data = inner
        else:
            return [(str(k), v) for k, v in data.items() if isinstance(v, Mapping)]
    if isinstance(data, list):
        return [(None, item) for item in data if isinstance(item, Mapping)]
    return []


def _rule(kind: type, value: object) -> int | Decimal | bool | str | None:
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        return {"true": True, "1": True, "false": False, "0": False}.get(text)
    if kind is str:
        return value if isinstance(value, str) and value else None
    number = _number(value)
    if number is None:
        return None
    if kind is int:
        return int(number) if number == number.to_integral_value() else None
    return number


def parse_pair_list(
    status: int, body: bytes, codec: Codec = DEFAULT_CODEC
) -> dict[str, PairListing]:
    """The pairs of an answer of PAIRS_PATH by name (see the module for the shapes)."""
    data = _data(PAIRS_PATH, status, body, codec)
    found: dict[str, PairListing] = {}
    for key_name, item in _entries(data)[:MAX_PAIRS]:
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), key_name)
        if not name:
            continue
        rules: dict[str, int | Decimal | bool | str] = {}
        for field, kind in RULE_FIELDS.items():
            for key in (_camel(field), field):
                if key in item:
                    value = _rule(kind, item[key])
                    if value is not None:
                        rules[field] = value
                    break
        found.setdefault(name, PairListing(name, rules))
    if not found and data not in (None, [], {}):
        raise _bad(PAIRS_PATH, status, body, "no pair with a name in the answer")
    return found
