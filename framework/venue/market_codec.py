"""The venue's market data decoded, sans-I/O: frames and REST answers into market records.

Strategies must see the market (issue 27); the venue offers it as WebSocket events
(api_depth, api_trade, api_kline) and unsigned public REST GETs (VENUE-FACTS "Market data").
The shapes are only partly published, so this module assumes as little as it can:

* Field names are the published ones (``price``, ``quantity``, ``isLong``,
  ``contractMatchPairId``, ``open`` ...) and every one is configurable (:class:`MarketFields`).
* Decimals come as JSON numbers or strings, read from their text (never through a float);
  NaN, infinities, negative amounts and non-positive prices are refused. Unknown keys are
  ignored; absent optional fields are None.
* A time is ms since the epoch, a number below 10^11 is seconds (as for the server time), a
  numeric string is read as a number, and ``yyyy-MM-dd HH:mm:ss`` text is UTC (the venue
  writes its date-times so). A trade's ``timestamp`` is preferred to its ``time``.
* A record names its pair, else its frame does, else the caller's (a kline names only its
  ``contractPairId``, so the subscription's pair is passed in).
* Book levels are ``{price, quantity}`` objects or ``[price, quantity, ...]`` arrays, sorted
  best first, quantity 0 left out; a side beyond ``max_levels`` (1000) keeps its best levels.
  A frame's text is checked level by level when it is decoded, and its Decimal levels are
  made on first use (:mod:`framework.venue.market_levels`: a replay's books are mostly
  never walked); a parsed object's levels are made at once.
* ``data`` of api_trade and api_kline is one object or an array; more than ``max_items``
  (1000) is refused, as dropping trades would misstate the last price and the volume.
  A REST list may also sit under ``list``/``records``/...
* A mark or index price's ``data`` is a number, a string or an object (``price_keys``).

A malformed frame or answer is one DecodeError naming the record, the wire field and its
path; a failed REST answer raises as ``parse_envelope`` does, HTTP 404 ExtensionUnavailable.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from operator import itemgetter
from types import GenericAlias
from typing import Annotated, Any, Final, Union

import attrs
import msgspec

from framework.venue import codec
from framework.venue.errors import BadResponse, DecodeError, ExtensionUnavailable
from framework.venue.market_levels import Levels
from framework.venue.market_records import (
    DEPTH,
    KLINE,
    MAX_ITEMS,
    MAX_LEVELS,
    TRADE,
    Bar,
    Book,
    IndexPrice,
    MarketRecord,
    MarkPrice,
    Trade,
)
from framework.venue.market_requests import MarketPaths
from framework.venue.models import SubscribeAck
from framework.venue.requests import excerpt, read_envelope, server_fault

__all__ = ["DEFAULT_MARKET_CODEC", "MarketCodec", "MarketFields"]

_LIST_KEYS: Final = ("list", "records", "rows", "data", "trades", "klines")


@attrs.frozen(slots=True)
class MarketFields:
    """Wire names of the market fields (the published ones by default; configurable)."""

    pair: str = "pair"
    price: str = "price"
    quantity: str = "quantity"
    amount: str = "amount"
    is_long: str = "isLong"
    trade_id: str = "contractMatchPairId"
    time: str = "time"
    timestamp: str = "timestamp"
    bids: str = "bids"
    asks: str = "asks"
    period: str = "period"
    open: str = "open"
    high: str = "high"
    low: str = "low"
    close: str = "close"
    count: str = "count"
    price_keys: tuple[str, ...] = ("price", "markPrice", "indexPrice", "value")


# ------------------------------------------------------------------------- decoding

_PATH: Final = re.compile(r" - at `\$([^`]*)`")
_KEY: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)(?:\[\d+\])*$")
_MISSING: Final = re.compile(r"missing required field `([^`]+)`")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MOST: Final = 1.7976931348623157e308
_PRICE: Final = Annotated[float, msgspec.Meta(gt=0, le=_MOST)]
"""A level's price as the float check takes it: a finite number above 0."""
_QUANTITY: Final = Annotated[float, msgspec.Meta(gt=0, le=_MOST)]
"""A level's quantity as the float check takes it: a finite number above 0 (a float reads
``-1e-400`` as -0.0 where its decimal is below 0: a zero is left to the exact decoder)."""
_MS: Final = timedelta(milliseconds=1)
_ZERO: Final = Decimal(0)
_INFINITE: Final = Decimal("Infinity")


_PATHS: Final = MarketPaths()


class _Event(msgspec.Struct, gc=False):
    event: Any = None


_untyped: Final = msgspec.json.Decoder(float_hook=Decimal).decode
_decode_event: Final = msgspec.json.Decoder(_Event).decode


def _wrap(exc: msgspec.MsgspecError, record: str, *, at: str | None = None) -> DecodeError:
    """A msgspec error as a DecodeError naming the record and the wire field of its path.

    at: where the decoded value sits in its frame (``$.data.bids``), when it was decoded
    apart from it: the error's path is told from there.
    """
    reason = str(exc)
    if at is not None:
        here = reason.find(" - at `$")
        if here < 0:
            reason = f"{reason} - at `{at}`"
        else:
            reason = f"{reason[:here]} - at `{at}{reason[here + 8 :]}"
    missing = _MISSING.search(reason)
    path = _PATH.search(reason)
    key = _KEY.search(path.group(1)) if path else None
    field = missing.group(1) if missing else key.group(1) if key else None
    return DecodeError(record, field, reason)


def _ms(value: Any) -> int | None:
    """ms since the epoch of a wire time (see the module); ValueError when unreadable."""
    if value is None or value == "":
        return None
    if type(value) is str and not value.strip().lstrip("-").replace(".", "", 1).isdigit():
        try:
            stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"expected a time (ms, s or a date-time), got {value!r}") from None
        stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
        return (stamp - _EPOCH) // _MS
    if type(value) is bool or not isinstance(value, int | str | Decimal | float):
        raise ValueError(f"expected a time, got {type(value).__name__}")
    number = Decimal(str(value).strip())
    if not number.is_finite() or number < 0:
        raise ValueError(f"expected a time, got {value}")
    return int(number * 1000) if number < 10**11 else int(number)


def _need(
    value: Decimal | None, record: str, key: str, at: str, *, positive: bool = False
) -> Decimal:
    """value, checked finite and not negative (positive: above 0); DecodeError when missing."""
    if value is None:
        raise DecodeError(record, key, f"required field is missing or null - at `{at}.{key}`")
    if not value.is_finite() or value < 0 or (positive and not value):
        kind = "a positive" if positive else "a non-negative"
        raise DecodeError(
            record, key, f"expected {kind} finite decimal, got {value} - at `{at}.{key}`"
        )
    return value


def _fine(price: Decimal | None, quantity: Decimal | None) -> bool:
    """True for a finite price above 0 and a finite quantity not below 0 (the fast check)."""
    return (
        price is not None
        and quantity is not None
        and price.is_finite()
        and quantity.is_finite()
        and price > 0
        and quantity >= 0
    )


def _may(value: Decimal | None, record: str, key: str, at: str) -> Decimal | None:
    """value checked as _need does, None allowed."""
    return None if value is None else _need(value, record, key, at)


def _items(data: Any) -> Any:
    """A REST list as it is, or the list an object holds under one of the usual keys."""
    if type(data) is dict:
        return next((data[k] for k in _LIST_KEYS if type(data.get(k)) is list), data)
    return [] if data is None else data


class MarketCodec:
    """Decoders of the market frames and answers for one set of field names and bounds."""

    __slots__ = ("_decode", "_exact_frame", "_floats", "_frames", "_prefixes", "_trades",
                 "_union", "fields", "max_items", "max_levels")  # fmt: skip

    def __init__(
        self,
        fields: MarketFields | None = None,
        *,
        max_levels: int = MAX_LEVELS,
        max_items: int = MAX_ITEMS,
    ) -> None:
        f = self.fields = fields if fields is not None else MarketFields()
        for name, bound in (("max_levels", max_levels), ("max_items", max_items)):
            if type(bound) is not int or bound < 1:
                raise ValueError(f"MarketCodec {name}: expected an integer >= 1, got {bound!r}")
        self.max_levels, self.max_items = max_levels, max_items

        def shape(name: str, spec: list[tuple[str, Any, str]], **kw: Any) -> Any:
            fields = [(a, t, msgspec.field(default=None, name=w)) for a, t, w in spec]
            return msgspec.defstruct(name, fields, frozen=True, gc=False, **kw)

        def one_or_many(item: Any) -> Any:
            return GenericAlias(list, (item,)) | item

        decimal = Decimal | None
        level = shape("Level", [("price", decimal, f.price), ("quantity", decimal, f.quantity)])
        levels = GenericAlias(list, (level | list[Decimal],)) | None
        common = [
            ("pair", str | None, f.pair),
            ("time", Any, f.time),
            ("timestamp", Any, f.timestamp),
        ]
        period = ("period", str | None, f.period)
        amounts = [("quantity", decimal, f.quantity), ("amount", decimal, f.amount)]
        trade = shape(
            "Trade",
            [
                *common,
                ("price", decimal, f.price),
                *amounts,
                ("is_long", bool | None, f.is_long),
                ("id", int | str | None, f.trade_id),
            ],
        )
        book = shape("Book", [*common, ("bids", levels, f.bids), ("asks", levels, f.asks)])
        ohlc = [(a, decimal, getattr(f, a)) for a in ("open", "high", "low", "close")]
        bar = shape("Bar", [*common, period, *ohlc, *amounts, ("count", int | None, f.count)])
        tag = {"tag_field": "event"}
        frames = {
            shape("T", [*common, ("data", one_or_many(trade), "data")], tag=TRADE, **tag): "Trade",
            shape("D", [*common, ("data", book, "data")], tag=DEPTH, **tag): "Book",
            shape(
                "K", [*common, period, ("data", one_or_many(bar), "data")], tag=KLINE, **tag
            ): "Bar",
        }
        # Frames as text: a book's levels are checked as floats in the one decode of the
        # frame, and made from its text on first use (market_levels); the exact decoder of
        # the frames is for the books the float check cannot take (_exact_frame).
        checked = msgspec.defstruct(
            "FloatLevel",
            [("price", _PRICE, msgspec.field(name=f.price)),
             ("quantity", _QUANTITY, msgspec.field(name=f.quantity))],
            frozen=True, gc=False, order=True,
        )  # fmt: skip
        floats: Any = GenericAlias(list, (checked,)) | None
        book_floats = shape("Book", [*common, ("bids", floats, f.bids), ("asks", floats, f.asks)])
        depth_floats = shape("D", [*common, ("data", book_floats, "data")], tag=DEPTH, **tag)
        self._frames: dict[type, str] = {**frames, depth_floats: "Book"}
        self._union: Any = Union[tuple(frames)]  # noqa: UP007 - a union built at run time
        text: Any = Union[(*(t for t, r in frames.items() if r != "Book"), depth_floats)]
        self._decode = msgspec.json.Decoder(text, strict=False, float_hook=Decimal).decode
        self._exact_frame = msgspec.json.Decoder(
            self._union, strict=False, float_hook=Decimal
        ).decode
        self._floats = depth_floats
        self._trades = next(t for t, r in frames.items() if r == "Trade")
        self._prefixes: dict[type, tuple[str, str] | tuple[bytes, bytes]] = {
            str: (f'"{f.bids}":[{{"{f.price}":"', f'"{f.asks}":[{{"{f.price}":"'),
            bytes: (
                f'"{f.bids}":[{{"{f.price}":"'.encode(),
                f'"{f.asks}":[{{"{f.price}":"'.encode(),
            ),
        }

    def frame(
        self, data: bytes | str | dict[str, Any], *, pair: str | None = None
    ) -> tuple[MarketRecord, ...] | SubscribeAck:
        """The records of one market frame (its text or parsed object), or a subscribe ack.

        pair: the subscription's, for records whose frame names none (klines). Pass the text
        where exactness matters: a float already parsed is read through its shortest repr.
        """
        if type(data) is dict:
            try:
                wire = msgspec.convert(data, self._union, strict=False)
            except msgspec.ValidationError as exc:
                failure = exc
            else:
                return self._records(wire, pair)
            return _not_market(data, failure)  # out of the except: its error alone is told
        one = self.record(data, pair)  # type: ignore[arg-type]
        return one if type(one) is tuple or type(one) is SubscribeAck else (one,)  # type: ignore[return-value]

    def record(
        self, data: bytes | str, pair: str | None = None
    ) -> MarketRecord | tuple[MarketRecord, ...] | SubscribeAck:
        """What :meth:`frame` gives for a frame's text, but the one record of the usual frame
        (a trade, a book) itself, not in a tuple: a replay's path, hundreds of thousands a
        second."""
        try:
            wire = self._decode(data)
        except msgspec.MsgspecError:  # a book the float check refuses, or no frame
            wire = None
        if wire is None:  # out of the except: the error told is the exact decoder's alone
            return self._exactly(data, pair)
        kind, items = type(wire), wire.data
        if kind is self._trades and type(items) is list and len(items) == 1:
            return self._trade(items[0], wire.pair or pair, None, "$.data[0]")
        if kind is self._floats and items is not None:  # checked: made later
            return self._lazy_book(data, items, wire.pair or pair, wire)
        return self._records(wire, pair)

    def _exactly(
        self, data: bytes | str, pair: str | None
    ) -> tuple[MarketRecord, ...] | SubscribeAck:
        """A frame the float check refused, decoded exactly (or the frame's error)."""
        try:
            wire = self._exact_frame(data)
        except msgspec.ValidationError as exc:
            failure = exc
        except msgspec.DecodeError as exc:
            raise DecodeError("frame", None, f"not JSON: {exc}") from None
        else:
            return self._records(wire, pair)
        return _not_market(data, failure)  # out of the except: its error alone is told

    def _records(self, wire: Any, pair: str | None) -> tuple[MarketRecord, ...]:
        """The records of a decoded frame."""
        record, items = self._frames[type(wire)], wire.data
        pair = wire.pair or pair
        if items is None:
            raise DecodeError(record, "data", "required field is missing or null - at `$.data`")
        if record == "Book":
            return (self._book(items, pair, wire, "$.data"),)
        make = self._trade if record == "Trade" else self._bar
        period = getattr(wire, "period", None)
        if type(items) is not list:
            return (make(items, pair, period, "$.data"),)
        if len(items) == 1:  # the usual frame
            return (make(items[0], pair, period, "$.data[0]"),)
        if len(items) > self.max_items:
            reason = f"{len(items)} records in one frame, at most {self.max_items} (max_items)"
            raise DecodeError(record, "data", reason)
        return tuple(make(w, pair, period, f"$.data[{i}]") for i, w in enumerate(items))

    def _pair(self, own: str | None, pair: str | None, record: str, at: str) -> str:
        """The record's own pair, else the frame's or the caller's."""
        if own or pair:
            return own or pair  # type: ignore[return-value]
        key = self.fields.pair
        raise DecodeError(record, key, f"no pair in the record, its frame or the call - at `{at}`")

    def _time(self, record: str, at: str, *values: tuple[str, Any]) -> int | None:
        """The first readable time of the (wire name, value) pairs given."""
        for key, value in values:
            if type(value) is int and value >= 10**11:  # ms, the usual case
                return value
            try:
                ms = _ms(value)
            except (ValueError, ArithmeticError) as exc:
                raise DecodeError(record, key, f"{exc} - at `{at}.{key}`") from None
            if ms is not None:
                return ms
        return None

    def _check(self, record: str, w: Any, at: str, positive: str, optional: str) -> None:
        """Raise the DecodeError of w's first bad decimal: positive ones > 0, optional ones >= 0."""
        for attr in positive.split():
            _need(getattr(w, attr), record, getattr(self.fields, attr), at, positive=True)
        for attr in optional.split():
            _may(getattr(w, attr), record, getattr(self.fields, attr), at)

    def _trade(self, w: Any, pair: str | None, _: str | None, at: str) -> Trade:
        price, quantity, amount, time = w.price, w.quantity, w.amount, w.timestamp
        try:  # the usual trade, in one test: None fails it (TypeError), a NaN too (signals)
            fine = (
                _ZERO < price < _INFINITE
                and _ZERO <= quantity < _INFINITE
                and (amount is None or _ZERO <= amount < _INFINITE)
            )
        except (TypeError, ArithmeticError):
            fine = False
        if not fine:  # say which field is bad (_need raises)
            _need(quantity, "Trade", self.fields.quantity, at)
            self._check("Trade", w, at, "price", "amount")
        if type(time) is not int or time < 10**11:  # not ms: read as the module says
            f = self.fields
            time = self._time("Trade", at, (f.timestamp, time), (f.time, w.time))
        own, id_ = w.pair, w.id
        return Trade(
            pair=own or pair or self._pair(own, pair, "Trade", at),
            price=price,
            quantity=quantity,
            is_long=w.is_long,
            time=time,
            id=None if id_ is None else id_ if type(id_) is str else str(id_),
            amount=amount,
        )

    def _bar(self, w: Any, pair: str | None, period: str | None, at: str) -> Bar:
        f, period = self.fields, w.period or period
        if not period:
            reason = f"no period in the bar, its frame or the call - at `{at}`"
            raise DecodeError("Bar", f.period, reason)
        if w.count is not None and w.count < 0:
            reason = f"expected a count >= 0, got {w.count} - at `{at}.{f.count}`"
            raise DecodeError("Bar", f.count, reason)
        self._check("Bar", w, at, "open high low close", "quantity amount")
        return Bar(
            pair=self._pair(w.pair, pair, "Bar", at),
            period=period,
            open=w.open,
            high=w.high,
            low=w.low,
            close=w.close,
            quantity=w.quantity,
            amount=w.amount,
            count=w.count,
            time=self._time("Bar", at, (f.time, w.time), (f.timestamp, w.timestamp)),
        )

    def _book(self, w: Any, pair: str | None, frame: Any, at: str) -> Book:
        """A book from its wire data; the frame's time when the data carries none."""
        f = self.fields
        bids = self._side(w.bids, f.bids, at, best_high=True)
        asks = self._side(w.asks, f.asks, at, best_high=False)
        time = w.timestamp
        if type(time) is not int or time < 10**11:  # not ms: read as the module says
            time = self._time("Book", at, (f.timestamp, time), (f.time, w.time)) or self._time(
                "frame", "$", (f.timestamp, frame.timestamp), (f.time, frame.time)
            )
        own = w.pair
        return Book(
            pair=own or pair or self._pair(own, pair, "Book", at),
            bids=bids,
            asks=asks,
            time=time,
        )

    def _lazy_book(self, data: str | bytes, w: Any, pair: str | None, frame: Any) -> Book:
        """A book whose levels passed the float check: its sides made from data on first use.

        The float check (an object of a price and a quantity above 0, each a finite number
        or numeric string) refuses what the exact decoder may take (arrays, ``1_000``, a
        quantity 0...): such a frame is decoded exactly, its levels made at once and refused
        with their located error if bad (_book). What it takes, the exact decoder takes alike
        (an escape is read the same by both; a minus sign fails it but in ``-0``, a zero).
        """
        bids, asks = w.bids, w.asks
        make, prefixes = self._make, self._prefixes[type(data)]
        time = w.timestamp
        if type(time) is not int or time < 10**11:  # not ms: read as the module says
            f = self.fields
            time = self._time(
                "Book", "$.data", (f.timestamp, time), (f.time, w.time)
            ) or self._time("frame", "$", (f.timestamp, frame.timestamp), (f.time, frame.time))
        own = w.pair
        lazy_bids: Any = Levels(data, bids, True, prefixes[0], make) if bids else ()
        lazy_asks: Any = Levels(data, asks, False, prefixes[1], make) if asks else ()
        return Book(
            pair=own or pair or self._pair(own, pair, "Book", "$.data"),
            bids=lazy_bids,
            asks=lazy_asks,
            time=time,
        )

    def _make(self, data: str | bytes, best_high: bool) -> tuple[tuple[Decimal, Decimal], ...]:
        """One side of a book frame _lazy_book took (so it decodes and passes _side)."""
        f = self.fields
        book = self._exact_frame(data).data
        if best_high:
            return self._side(book.bids, f.bids, "$.data", best_high=True)
        return self._side(book.asks, f.asks, "$.data", best_high=False)

    def _side(
        self, levels: list[Any] | None, key: str, at: str, *, best_high: bool
    ) -> tuple[tuple[Decimal, Decimal], ...]:
        """One side's levels of quantity above 0, best first, at most max_levels."""
        out = []
        for i, level in enumerate(levels or ()):
            if type(level) is list:
                if len(level) < 2:
                    self._refuse_level(level, f"{at}.{key}[{i}]", key)
                price, quantity = level[0], level[1]
            else:
                price, quantity = level.price, level.quantity
            if not _fine(price, quantity):
                self._refuse_level(level, f"{at}.{key}[{i}]", key)
            if quantity:
                out.append((price, quantity))
        out.sort(key=itemgetter(0), reverse=best_high)
        return tuple(out[: self.max_levels])

    def _refuse_level(self, level: Any, where: str, key: str) -> None:
        """Raise the DecodeError of a level that is not a positive price and a quantity."""
        if type(level) is list and len(level) < 2:
            reason = f"expected [price, quantity], got {len(level)} values - at `{where}`"
            raise DecodeError("Book", key, reason)
        price, quantity = level[:2] if type(level) is list else (level.price, level.quantity)
        _need(price, "Book", self.fields.price, where, positive=True)
        _need(quantity, "Book", self.fields.quantity, where)

    # --------------------------------------------------------------------- REST answers

    def trades(
        self, status: int, body: bytes, pair: str, *, path: str = _PATHS.trades
    ) -> tuple[Trade, ...]:
        """The trades of an answer of the trades GET, in the venue's order."""
        data = _items(_data(path, status, body))
        return self.frame({"event": TRADE, "pair": pair, "data": data})  # type: ignore[return-value]

    def klines(
        self, status: int, body: bytes, pair: str, period: str, *, path: str = _PATHS.kline
    ) -> tuple[Bar, ...]:
        """The bars of an answer of the kline GET, in the venue's order."""
        data = _items(_data(path, status, body))
        frame = {"event": KLINE, "pair": pair, "period": period, "data": data}
        return self.frame(frame)  # type: ignore[return-value]

    def depth(self, status: int, body: bytes, pair: str, *, path: str = _PATHS.depth) -> Book:
        """The book of an answer of the depth GET."""
        data = _data(path, status, body)
        return self.frame({"event": DEPTH, "pair": pair, "data": data})[0]  # type: ignore[index,return-value]

    def mark_price(
        self, status: int, body: bytes, pair: str, *, path: str = _PATHS.mark_price
    ) -> MarkPrice:
        """The mark price of an answer of the markPrice GET."""
        return MarkPrice(**self._price("MarkPrice", _data(path, status, body), pair))

    def index_price(
        self, status: int, body: bytes, pair: str, *, path: str = _PATHS.index_price
    ) -> IndexPrice:
        """The index price of an answer of the indexPrice GET."""
        return IndexPrice(**self._price("IndexPrice", _data(path, status, body), pair))

    def _price(self, record: str, data: Any, pair: str) -> dict[str, Any]:
        """pair, price and time of a price answer's data (a number, a string or an object)."""
        f, at, key, time = self.fields, "$", "data", None
        if type(data) is dict:
            at, key = "$.data", next((k for k in f.price_keys if data.get(k) is not None), f.price)
            pair = data[f.pair] if type(data.get(f.pair)) is str and data[f.pair] else pair
            stamps = (f.timestamp, data.get(f.timestamp)), (f.time, data.get(f.time))
            time, data = self._time(record, at, *stamps), data.get(key)
        try:
            price = msgspec.convert(data, Decimal | None, strict=False)
        except msgspec.ValidationError as exc:
            raise DecodeError(record, key, f"{exc} - at `{at}.{key}`") from None
        return {"pair": pair, "price": _need(price, record, key, at, positive=True), "time": time}


def _not_market(
    data: bytes | str | dict[str, Any], failure: msgspec.ValidationError
) -> SubscribeAck:
    """A subscribe ack, or the DecodeError of a frame the market decoder refused."""
    try:
        event = data.get("event") if type(data) is dict else _decode_event(data).event  # type: ignore[arg-type]
    except msgspec.MsgspecError as exc:
        raise DecodeError("frame", None, str(exc)) from None
    record = (
        {TRADE: "Trade", DEPTH: "Book", KLINE: "Bar"}.get(event) if type(event) is str else None
    )
    if record is not None:
        path = _PATH.search(str(failure))
        inside = path is not None and path.group(1).startswith(".data")
        raise _wrap(failure, record if inside else "frame") from None
    if type(event) is str and event.endswith("_res"):
        if type(data) is dict:
            return codec.decode(SubscribeAck, data)
        return codec.decode_json(SubscribeAck, data)  # type: ignore[arg-type]
    shown = repr(event) if len(repr(event)) <= 40 else repr(event)[:37] + "..."
    raise DecodeError("frame", "event", f"unknown event {type(event).__name__} {shown}")


def _data(path: str, status: int, body: bytes) -> Any:
    """The data of a success answer (its floats read as Decimal), or the answer's error."""
    if status == 404:
        raise ExtensionUnavailable(path, "HTTP 404", http_status=404)
    if status >= 500:
        raise server_fault(status, body)
    try:
        obj = _untyped(body)
    except msgspec.DecodeError:
        shown = excerpt(body)
        raise BadResponse(
            f"HTTP {status}: body is not JSON: {shown!r}", http_status=status, excerpt=shown
        ) from None
    return read_envelope(status, obj, body).data


DEFAULT_MARKET_CODEC: Final = MarketCodec()
"""The codec of the published field names and the default bounds."""
