"""A first look at a WebSocket frame: its event and the keys a push is filed under, nothing more.

Decoding a push into its record (:meth:`framework.venue.codec.Codec.decode_frame`) builds a
dict of every field, a Decimal per amount and a frozen record; a replay with nobody listening
to pushes needs none of that, only what the portfolio files a push under: the position's pair,
id, quantity and change type, or the balance's coin and logId. :func:`peek_frame` reads just
those, typed and validated, with msgspec (it skips every other field without making objects),
in about a third of the time ``orjson.loads`` takes for the whole frame.

The frame itself is kept: whoever needs the push decodes it later with the codec, so what a
peek leaves unchecked (an amount that is not a number, an unknown direction) is found then.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

__all__ = [
    "PEEK_ERRORS",
    "BatchHead",
    "FrameHead",
    "HeadData",
    "MatchHead",
    "OrderHead",
    "PageHead",
    "peek_batch_answer",
    "peek_frame",
    "peek_match_page",
]


class HeadData(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """The routing fields of a push's data object, by their wire keys in camelCase (absent: None)."""

    symbol: str | None = None
    """The position's pair (api_position) or the coin (api_account)."""
    position_id: int | None = None
    """The position's id (api_position)."""
    current_quantity: str | None = None
    """The position's quantity after the change, as sent (api_position)."""
    change_type: Literal["NEW", "INCREASE", "CLOSE", "LIQUIDATE", "REDUCE"] | None = None
    """The change type (api_position): one of ChangeType's values, or the frame is no push."""
    log_id: int | None = None
    """The balance's version (api_account)."""
    opening_price: str | int | float | None = None
    """The position's opening price, as sent (api_position: a price a backtest may use)."""


class FrameHead(msgspec.Struct, frozen=True, gc=False):
    """A frame's event, success flag and the routing fields of its data object."""

    event: str
    """api_position, api_account, or an acknowledgement's ``<event>_res``."""
    success: bool = True
    """The frame's success flag."""
    data: HeadData | None = None
    """The data object's routing fields (None when the frame has none)."""


PEEK_ERRORS: Final = (msgspec.DecodeError,)
"""What peek_frame raises for a frame that is not JSON or not shaped like a frame."""

peek_frame: Final = msgspec.json.Decoder(FrameHead).decode
"""peek_frame(frame) is the frame's FrameHead; raises one of PEEK_ERRORS when it is not one."""


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
