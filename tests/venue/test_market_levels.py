"""A book decoded from text makes its Decimal levels on first use (market_levels): it reads,
compares and prints as the tuples the codec made before, its best prices are exact, and a
bad level is refused when the frame is decoded, never later."""

from __future__ import annotations

import copy
import pickle
from decimal import Decimal
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.venue.errors import DecodeError
from framework.venue.market import DEFAULT_MARKET_CODEC as codec
from framework.venue.market import Book, MarketCodec
from framework.venue.market_levels import Levels


def depth(asks: Any, bids: Any) -> bytes:
    """An api_depth frame of these sides."""
    return orjson.dumps(
        {"event": "api_depth", "pair": "E", "data": {"asks": asks, "bids": bids, "timestamp": 1}}
    )


def lazy(frame: bytes, on: MarketCodec = codec) -> Book:
    """The book of a depth frame decoded from its text."""
    (book,) = on.frame(frame)
    assert isinstance(book, Book)
    return book


def eager(frame: bytes, on: MarketCodec = codec) -> Book:
    """The book of the same frame decoded from its parsed object (levels made at once)."""
    (book,) = on.frame(orjson.loads(frame))
    assert isinstance(book, Book)
    return book


def level(price: str, quantity: str) -> dict[str, str]:
    return {"price": price, "quantity": quantity}


def test_a_book_from_text_keeps_its_levels_unmade_until_read() -> None:
    book = lazy(depth([level("101", "1")], [level("99", "2"), level("98", "1")]))
    assert isinstance(book.bids, Levels) and book.bids.made is None
    assert book.best_bid == Decimal(99) and book.bids.made is None  # the best needs none
    assert book.bids[1] == (Decimal(98), Decimal(1))
    assert book.bids.made == ((Decimal(99), Decimal(2)), (Decimal(98), Decimal(1)))
    assert book.bids.raw == b"" and book.best_bid == Decimal(99)  # its text let go once made


def test_unmade_levels_read_compare_and_print_as_the_tuples() -> None:
    frame = depth([level("101.50", "1"), level("101", "0"), ["100.5", "2"]], [level("99", "0.10")])
    book, made = lazy(frame), eager(frame)
    asks = ((Decimal("100.5"), Decimal(2)), (Decimal("101.50"), Decimal(1)))
    assert isinstance(made.asks, tuple) and made.asks == asks
    assert book == made and repr(book) == repr(made) and hash(book) == hash(made)
    assert lazy(frame).asks == asks and asks == lazy(frame).asks
    assert lazy(frame).asks != asks[:1] and lazy(frame).asks != list(asks)
    assert len(book.asks) == 2 and bool(book.asks) and list(book.asks) == list(asks)
    assert book.asks[:1] == asks[:1] and book.asks[-1] == asks[-1]
    assert asks[0] in book.asks and book.asks.index(asks[1]) == 1 and book.asks.count(asks[0]) == 1
    plus = book.asks + book.bids  # the + of Levels
    assert plus == asks + ((Decimal(99), Decimal("0.10")),)  # noqa: RUF005
    assert () + book.asks == asks  # noqa: RUF005
    assert list(reversed(book.asks)) == list(reversed(asks))
    assert pickle.loads(pickle.dumps(book)) == made and copy.deepcopy(book) == made
    assert msgspec.structs.replace(book, asks=()) == msgspec.structs.replace(made, asks=())
    with pytest.raises(AttributeError):
        book.bids = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("bids", "best"),
    [
        ([level("99.10", "1"), level("99.09", "5")], "99.10"),  # the text's exponent kept
        ([level("98", "1"), level("99.0", "1")], "99.0"),  # not best first: made
        ([level("99", "0"), level("98", "1")], "98"),  # a first level of quantity 0: made
        ([level("99.00", "1"), level("99", "2")], "99.00"),  # a tie: made, the first kept
        ([[99, 1], level("98", "1")], "99"),  # an array level: made at once
        ([{"quantity": "1", "price": "97.5"}], "97.5"),  # price second: made
        ([], None),
    ],
)
def test_the_best_price_is_the_made_levels_first(bids: Any, best: str | None) -> None:
    book, made = lazy(depth([level("100", "1")], bids)), eager(depth([level("100", "1")], bids))
    want = None if best is None else Decimal(best)
    assert (book.best_bid, made.best_bid) == (want, want)
    assert str(book.best_bid) == str(made.best_bid)
    assert book.mid == made.mid and str(book.mid) == str(made.mid)


@given(
    st.lists(
        st.tuples(
            st.decimals(min_value="0.01", max_value="1e6", places=2),
            st.decimals(min_value=0, max_value=100, places=3),
        ),
        max_size=8,
    ),
    st.lists(
        st.tuples(
            st.decimals(min_value="0.01", max_value="1e6", places=2),
            st.decimals(min_value=0, max_value=100, places=3),
        ),
        max_size=8,
    ),
)
def test_best_prices_and_levels_agree_with_the_levels_made_at_once(
    asks: list[tuple[Decimal, Decimal]], bids: list[tuple[Decimal, Decimal]]
) -> None:
    frame = depth(
        [level(str(p), str(q)) for p, q in asks], [level(str(p), str(q)) for p, q in bids]
    )
    book, made = lazy(frame), eager(frame)
    assert (str(book.best_bid), str(book.best_ask)) == (str(made.best_bid), str(made.best_ask))
    assert str(book.mid) == str(made.mid)
    assert book.bids == made.bids and book.asks == made.asks


@pytest.mark.parametrize(
    ("asks", "field", "where"),
    [
        ([level("1", "1"), level("0", "1")], "price", "$.data.asks[1].price"),
        ([level("1", "-1e-400")], "quantity", "$.data.asks[0].quantity"),
        ([level("1", "-0.5")], "quantity", "$.data.asks[0].quantity"),
        ([level("NaN", "1")], "price", "$.data.asks[0].price"),
        ([level("1", "abc")], "quantity", "$.data.asks[0].quantity"),
        ([{"price": "1"}], "quantity", "$.data.asks[0].quantity"),
        ([level("1", "1"), [2]], "asks", "$.data.asks[1]"),
        ("x", "asks", "$.data.asks"),
        ({"price": "1"}, "asks", "$.data.asks"),
    ],
)
def test_a_bad_level_is_refused_when_the_frame_is_decoded(
    asks: Any, field: str, where: str
) -> None:
    with pytest.raises(DecodeError) as caught:
        codec.frame(depth(asks, []))
    message = str(caught.value)
    assert f"Book.{field}" in message and where in message and "\n" not in message


def test_max_levels_keeps_the_best_of_an_unmade_side() -> None:
    small = MarketCodec(max_levels=2)
    frame = depth([level(str(100 + i), "1") for i in range(5, 0, -1)], [])
    book = lazy(frame, small)
    assert [p for p, _ in book.asks] == [Decimal(101), Decimal(102)]
    assert book.best_ask == Decimal(101) and book == eager(frame, small)


def test_fields_named_otherwise_are_read_alike() -> None:
    from framework.venue.market import MarketFields

    other = MarketCodec(MarketFields(price="p", quantity="q", bids="b", asks="a"))
    frame = orjson.dumps(
        {"event": "api_depth", "pair": "E", "data": {"a": [{"p": "2.5", "q": "1"}], "b": []}}
    )
    book = lazy(frame, other)
    assert isinstance(book.asks, Levels)
    assert book.best_ask == Decimal("2.5") and book.asks == ((Decimal("2.5"), Decimal(1)),)


@pytest.mark.parametrize("as_text", [False, True])
def test_a_minus_sign_or_an_escape_reads_as_the_exact_decoder_reads_it(as_text: bool) -> None:
    """The float check reads -1e-400 as -0.0 (a zero: left to the exact decoder, which
    refuses it, escaped or not); the pairs' minus signs are no reason; an escaped price is
    read as the decoder reads it, its best price too."""

    def frame(asks: Any, pair: str = "ETH-USD") -> Any:
        data = {"asks": asks, "bids": [], "pair": pair, "timestamp": 1}
        text = orjson.dumps({"event": "api_depth", "pair": pair, "data": data})
        return text.decode() if as_text else text

    with pytest.raises(DecodeError) as caught:
        codec.frame(frame([level("1", "-1e-400")]))
    assert "$.data.asks[0].quantity" in str(caught.value)
    (book,) = codec.frame(frame([level("2.5", "1")]))
    assert isinstance(book, Book) and isinstance(book.asks, Levels)
    assert book.best_ask == Decimal("2.5") and book.pair == "ETH-USD"
    plain = frame([level("2.5", "1")])
    text = plain.replace("2.5", "2\\u002e5") if as_text else plain.replace(b"2.5", b"2\\u002e5")
    (escaped,) = codec.frame(text)
    assert isinstance(escaped, Book) and escaped.best_ask == Decimal("2.5")
    assert escaped.asks == ((Decimal("2.5"), Decimal(1)),)
    escaped_minus = frame([level("1", "-1e-400")]).replace(*minus(as_text, "\\u002d1e\\u002d400"))
    hidden = (  # the pair's two minus signs, escaped, as many as the level's
        '{"event":"api_depth","pair":"E\\u002dT\\u002dH","data":{"asks":[{"price":"1",'
        '"quantity":"-1e-400"}],"timestamp":1}}'
    )
    for text in (escaped_minus, hidden if as_text else hidden.encode()):
        with pytest.raises(DecodeError) as caught:
            codec.frame(text)
        assert "$.data.asks[0].quantity" in str(caught.value)


def minus(as_text: bool, into: str) -> tuple[Any, Any]:
    """The replace() arguments of -1e-400 into that text, as str or bytes."""
    return ("-1e-400", into) if as_text else (b"-1e-400", into.encode())


def test_whether_a_side_has_a_level_is_told_without_making_them() -> None:
    book = lazy(depth([level("101", "1")], [level("99", "2")]))
    assert book.bids and book.asks
    assert book.bids.made is None and book.asks.made is None  # type: ignore[union-attr]
    one_sided = lazy(depth([level("101", "1")], []))
    assert one_sided.asks and not one_sided.bids and one_sided.mid is None
    assert bool(lazy(depth([level("101", "1")], [])).asks) == bool(
        eager(depth([level("101", "1")], [])).asks
    )


@pytest.mark.parametrize("bound", [{"max_levels": 0}, {"max_items": 0}, {"max_levels": 1.5}])
def test_a_codec_bound_below_one_is_refused_naming_it(bound: dict[str, Any]) -> None:
    with pytest.raises(
        ValueError, match=f"MarketCodec {next(iter(bound))}: expected an integer >= 1"
    ):
        MarketCodec(**bound)


def test_record_gives_the_usual_frames_one_record_and_frame_the_same_in_a_tuple() -> None:
    frame = depth([level("101", "1")], [level("99", "2")])
    one = codec.record(frame)
    assert isinstance(one, Book) and codec.frame(frame) == (one,)
    trades = orjson.dumps({"event": "api_trade", "pair": "E", "data": [
        {"price": "1", "quantity": "2", "timestamp": 1_700_000_000_000},
        {"price": "2", "quantity": "1", "timestamp": 1_700_000_000_001},
    ]})  # fmt: skip
    assert codec.record(trades) == codec.frame(trades) and len(codec.frame(trades)) == 2
