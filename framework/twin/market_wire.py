"""The twin's market on the wire: WebSocket frames and REST ``data`` in the venue's shapes.

Written from VENUE-FACTS "Market data" (not through the framework's market codec, so the
twin stays an independent check of it; the tests decode every frame and answer with it):

* api_depth: ``{"event": "api_depth", "pair", "data": {"asks": [{"price", "quantity"}],
  "bids": [...], "timestamp"}}``, a snapshot, best levels first.
* api_trade: ``{"event": "api_trade", "pair", "data": [trade, ...]}``, a trade being
  ``{contractMatchPairId, pair, price, quantity, amount, isLong, time, timestamp,
  contractPairId}`` with ``time`` the venue's ``yyyy-MM-dd HH:mm:ss`` (UTC) and
  ``timestamp`` ms; ``isLong`` is the taker's side.
* api_kline: ``{"event": "api_kline", "pair", "period", "data": {amount, close, count,
  high, low, open, period, quantity, time, contractPairId}}``, ``time`` the bar's start in ms.
* markPrice and indexPrice answers: ``{"pair", "price", "time"}``.

Decimals are strings (as every other twin answer), exact.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from framework.venue.codec import plain_decimal
from framework.venue.market import DEPTH, KLINE, TRADE, Bar, Book, Trade

__all__ = [
    "bar_object",
    "book_object",
    "depth_frame",
    "kline_frame",
    "price_object",
    "trade_frame",
    "trade_object",
]


def _text_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def book_object(book: Book | None, limit: int, now_ms: int) -> dict[str, Any]:
    """A book's best limit levels per side (an empty book when there is none)."""
    bids = book.bids[:limit] if book is not None else ()
    asks = book.asks[:limit] if book is not None else ()
    time = book.time if book is not None and book.time is not None else now_ms
    return {
        "asks": [{"price": plain_decimal(p), "quantity": plain_decimal(q)} for p, q in asks],
        "bids": [{"price": plain_decimal(p), "quantity": plain_decimal(q)} for p, q in bids],
        "timestamp": time,
    }


def trade_object(trade: Trade, contract_pair_id: int) -> dict[str, Any]:
    """One trade (VENUE-FACTS api_trade)."""
    time = trade.time or 0
    amount = trade.amount if trade.amount is not None else trade.price * trade.quantity
    return {
        "contractMatchPairId": int(trade.id) if trade.id and trade.id.isdigit() else trade.id,
        "pair": trade.pair,
        "price": plain_decimal(trade.price),
        "quantity": plain_decimal(trade.quantity),
        "amount": plain_decimal(amount),
        "isLong": trade.is_long,
        "time": _text_time(time),
        "timestamp": time,
        "contractPairId": contract_pair_id,
    }


def bar_object(bar: Bar, contract_pair_id: int) -> dict[str, Any]:
    """One bar (VENUE-FACTS api_kline)."""
    return {
        "amount": plain_decimal(bar.amount) if bar.amount is not None else "0",
        "close": plain_decimal(bar.close),
        "count": bar.count or 0,
        "high": plain_decimal(bar.high),
        "low": plain_decimal(bar.low),
        "open": plain_decimal(bar.open),
        "period": bar.period,
        "quantity": plain_decimal(bar.quantity) if bar.quantity is not None else "0",
        "time": bar.time,
        "contractPairId": contract_pair_id,
    }


def price_object(pair: str, price: Any, now_ms: int) -> dict[str, Any]:
    """A mark or index price answer's data."""
    return {"pair": pair, "price": plain_decimal(price), "time": now_ms}


def depth_frame(pair: str, book: Book, levels: int, now_ms: int) -> dict[str, Any]:
    """An api_depth push: the book's snapshot."""
    return {"event": DEPTH, "pair": pair, "data": book_object(book, levels, now_ms)}


def trade_frame(pair: str, trades: tuple[Trade, ...], contract_pair_id: int) -> dict[str, Any]:
    """An api_trade push: the trades of one tick, oldest first."""
    return {
        "event": TRADE,
        "pair": pair,
        "data": [trade_object(t, contract_pair_id) for t in trades],
    }


def kline_frame(bar: Bar, contract_pair_id: int) -> dict[str, Any]:
    """An api_kline push: the open bar of one period after a tick's trades."""
    return {
        "event": KLINE,
        "pair": bar.pair,
        "period": bar.period,
        "data": bar_object(bar, contract_pair_id),
    }
