"""A first look at a WebSocket frame: its event and the keys a push is filed under, nothing more.

Decoding a push into its record (:meth:`framework.venue.codec.Codec.decode_frame`) builds a
dict of every field, a Decimal per amount and a frozen record; a replay with nobody listening
to pushes needs none of that, only what the portfolio files a push under: the position's pair,
id, quantity and change type, or the balance's coin and logId. :func:`peek_push` reads just
those, typed and validated, with msgspec (it skips every other field without making objects),
in about half the time ``orjson.loads`` takes for the whole frame; the event picks the type
(:class:`PositionHead` or :class:`AccountHead`), and anything that is not such a push with
all its routing fields (an acknowledgement, say) is refused, to go the long way.

The frame itself is kept: whoever needs the push decodes it later with the codec, so what a
peek leaves unchecked (an amount that is not a number, an unknown direction) is found then.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

__all__ = [
    "PEEK_ERRORS",
    "AccountHead",
    "AccountRoute",
    "BatchHead",
    "ChangeTypeText",
    "MatchHead",
    "OrderHead",
    "PageHead",
    "PositionHead",
    "PositionRoute",
    "peek_batch_answer",
    "peek_match_page",
    "peek_opening_price",
    "peek_push",
]


ChangeTypeText = Literal["NEW", "INCREASE", "CLOSE", "LIQUIDATE", "REDUCE"]
"""ChangeType's values as sent: a position push with any other change type is no push here."""


class PositionRoute(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """The routing fields of an api_position push's data, by their wire keys in camelCase."""

    symbol: str
    """The position's pair."""
    change_type: ChangeTypeText
    """The change type."""
    position_id: int | None = None
    """The position's id."""
    current_quantity: str | None = None
    """The position's quantity after the change, as sent."""


class AccountRoute(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """The routing fields of an api_account push's data: the coin and the balance's version."""

    symbol: str
    """The coin."""
    log_id: int
    """The balance's version (logId)."""


class PositionHead(msgspec.Struct, frozen=True, tag_field="event", tag="api_position", gc=False):
    """An api_position push at a first look."""

    data: PositionRoute
    """Its routing fields."""
    success: bool = True
    """The frame's success flag (read only to refuse one that is not a boolean, as the codec does)."""


class AccountHead(msgspec.Struct, frozen=True, tag_field="event", tag="api_account", gc=False):
    """An api_account push at a first look."""

    data: AccountRoute
    """Its routing fields."""
    success: bool = True
    """The frame's success flag (read only to refuse one that is not a boolean, as the codec does)."""


PEEK_ERRORS: Final = (msgspec.DecodeError,)
"""What the peeks raise for a text that is not JSON or not of the shape they read."""

peek_push: Final = msgspec.json.Decoder(PositionHead | AccountHead).decode
"""peek_push(frame) is a push's PositionHead or AccountHead; raises one of PEEK_ERRORS for
anything else (an acknowledgement, an unknown event, a push missing a routing field)."""


class _OpeningPrice(msgspec.Struct, frozen=True, rename="camel", gc=False):
    opening_price: str | int | float | None = None


class _PositionPrice(msgspec.Struct, frozen=True, gc=False):
    data: _OpeningPrice


_PEEK_PRICE: Final = msgspec.json.Decoder(_PositionPrice).decode


def peek_opening_price(frame: str) -> str | int | float | None:
    """The openingPrice of a position push's data, as sent (a price a backtest may use).

    Read apart from the routing fields: a backtest wants it of new positions only. None
    when the frame has none, or none of a usable type.
    """
    try:
        return _PEEK_PRICE(frame).data.opening_price
    except PEEK_ERRORS:
        return None


class MatchHead(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """What a match-result poll tells of one match at a first look (absent fields: None)."""

    id: int
    """The match id."""
    entrust_id: int | None = None
    """The order's id (orderId of its batchCreate answer)."""
    contract_position_id: int | None = None
    """The position the match changed."""
    symbol: str | None = None
    """The pair."""
    average_price: str | int | float | None = None
    """The fill price, as sent."""
    create_time_stamp: int | None = None
    """When it matched, epoch milliseconds."""


class PageHead(msgspec.Struct, frozen=True):
    """A REST answer's code and, for a match-result poll, its matches at a first look."""

    code: int
    """The envelope's code (200: success)."""
    data: list[MatchHead] | None = None
    """The matches (None when the answer carries none)."""


peek_match_page: Final = msgspec.json.Decoder(PageHead).decode
"""peek_match_page(body) is a match-result answer's PageHead; raises one of PEEK_ERRORS."""


class OrderHead(msgspec.Struct, frozen=True, rename="camel"):
    """One result of a batchCreate answer at a first look."""

    order_id: int | None = None
    """The venue's id of the order (None when it was refused)."""


class BatchHead(msgspec.Struct, frozen=True):
    """A batchCreate answer's code and its results at a first look."""

    code: int
    """The envelope's code (200: success)."""
    data: list[OrderHead] | None = None
    """One result per order."""


peek_batch_answer: Final = msgspec.json.Decoder(BatchHead).decode
"""peek_batch_answer(body) is a batchCreate answer's BatchHead; raises one of PEEK_ERRORS."""
