"""A CSV of prices or bars as a market source: in a backtest on virtual time, live on the wall
clock, every bad row one located line."""

from __future__ import annotations

from decimal import Decimal as D
from pathlib import Path
from typing import Any

import anyio
import pytest

from framework import Strategy
from framework.backtest.runner import Backtest
from framework.config import parse_config
from framework.market_csv import CsvMarket
from framework.recording import RecordingWriter
from framework.venue.errors import ConfigError
from framework.venue.market import Bar, MarkPrice, Trade
from tests.venue.frames import position_frame

T0 = 1_700_000_000_000


class Heard(Strategy):
    """Notes the market records of its pairs with the runtime's time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.heard: list[tuple[int, object]] = []

    def _note(self, record: object) -> None:
        self.heard.append((int(self.now().timestamp() * 1000), record))

    def on_trade(self, trade: Trade) -> None:
        """Noted."""
        self._note(trade)

    def on_bar(self, bar: Bar) -> None:
        """Noted."""
        self._note(bar)

    def on_mark(self, mark: MarkPrice) -> None:
        """Noted."""
        self._note(mark)


def config(params: str) -> str:
    return f"""\
venue: {{embedded: true}}
pairs:
  ETH-USD: {{}}
strategies:
  - {{name: heard, class: "tests.backtest.test_market_csv:Heard", pairs: [ETH-USD]}}
sources:
  - {{name: csv, class: "framework.market_csv:CsvMarket", params: {params}}}
logging: {{level: WARNING}}
"""


def recording(path: Path) -> Path:
    """A recording from T0 to T0 + 10 s (the backtest's span)."""
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, position_frame(1, "0.5"))
        w.write_ws(T0 + 10_000, position_frame(1, "0.6", "ADD"))
    return path


def test_prices_are_mark_prices_fed_at_their_times_in_a_backtest(tmp_path: Path) -> None:
    csv = tmp_path / "eth.csv"
    csv.write_text(
        f"time,price,note\n{T0 - 2000},1990,x\n{T0 - 1000},1995,\n{T0 + 1500},2001.5,\n"
        "2023-11-14T22:13:23Z,2002\n"  # T0 + 3 s, ISO 8601
        f"{T0 + 20_000},2010,after the recording\n"
    )
    result = Backtest(
        parse_config(config(f"{{file: '{csv}', pair: ETH-USD}}")), recording(tmp_path / "r.jsonl")
    ).run()
    heard = result.strategies[0].heard  # type: ignore[attr-defined]
    assert heard == [
        (T0, MarkPrice(pair="ETH-USD", price=D("1995"), time=T0 - 1000)),  # the last before
        (T0 + 1500, MarkPrice(pair="ETH-USD", price=D("2001.5"), time=T0 + 1500)),
        (T0 + 3000, MarkPrice(pair="ETH-USD", price=D("2002"), time=T0 + 3000)),
    ]


def test_bars_and_trades_and_the_start_alignment(tmp_path: Path) -> None:
    bars = tmp_path / "bars.csv"
    bars.write_text("time,open,high,low,close,quantity\n0,10,12,9,11,5\n60000,11,13,10,12,\n")
    source = CsvMarket("b", {"file": str(bars), "pair": "ETH-USD", "period": "1MIN"})
    assert source.records == (Bar,)
    last = Bar(pair="ETH-USD", period="1MIN", open=D(11), high=D(13), low=D(10), close=D(12),
               time=60_000)  # fmt: skip
    assert list(source.timed(T0)) == [(T0, last)]  # align time: of the old rows, the last
    start = CsvMarket(
        "b", {"file": str(bars), "pair": "ETH-USD", "period": "1MIN", "align": "start"}
    )
    assert [(ms, r.time, r.close) for ms, r in start.timed(T0)] == [  # type: ignore[union-attr]
        (T0, T0, D(11)),
        (T0 + 60_000, T0 + 60_000, D(12)),
    ]
    trades = tmp_path / "trades.csv"
    trades.write_text("ts,price,quantity\n5,100,0.5\n6,101,\n")
    source = CsvMarket("t", {"file": str(trades), "pair": "ETH-USD", "record": "trade"})
    assert [r for _, r in source.timed(0)] == [
        Trade(pair="ETH-USD", price=D(100), quantity=D("0.5"), time=5),
        Trade(pair="ETH-USD", price=D(101), quantity=D(0), time=6),
    ]


def test_live_rows_are_fed_on_the_wall_clock_in_order(tmp_path: Path) -> None:
    now = 1_700_000_000_000
    csv = tmp_path / "live.csv"
    csv.write_text(f"time,price\n{now - 5000},1\n{now - 4000},2\n{now + 30},3\n{now + 60},4\n")
    clock = [now]  # the wall clock, passed in: each sleep moves it on by what was asked

    async def sleep(seconds: float) -> None:
        clock[0] += round(seconds * 1000)

    def fed_by(**params: str) -> list[tuple[int, Any, int | None]]:
        clock[0] = now
        fed: list[tuple[int, Any, int | None]] = []
        source = CsvMarket("c", {"file": str(csv), "pair": "ETH-USD", **params},
                           now_ms=lambda: clock[0], sleep=sleep)  # fmt: skip
        anyio.run(source.run, lambda r: fed.append((clock[0] - now, r.price, r.time)))
        return fed

    # of the past rows only the last, at once; the others when the clock reaches them
    assert fed_by() == [(0, D(2), now - 4000), (30, D(3), now + 30), (60, D(4), now + 60)]
    spaced = [(0, D(1), now), (1000, D(2), now + 1000), (5030, D(3), now + 5030),
              (5060, D(4), now + 5060)]  # fmt: skip
    assert fed_by(align="start") == spaced


@pytest.mark.parametrize(
    ("text", "params", "message"),
    [
        ("time,price\n1,2\nyesterday,3\n", {}, r"x\.csv:3: time 'yesterday' is not a time"),
        ("time,price\n1,2\n2,-3\n", {}, r"x\.csv:3: price '-3' is not a positive number"),
        ("time,price\n1,2\n2,NaN\n", {}, r"x\.csv:3: price 'NaN' is not a positive number"),
        ("time,price\n5,2\n4,3\n", {}, r"x\.csv:3: time goes back"),
        ("time,price\n1,2\n2,3\n3,4\n", {"max_rows": 2}, r"x\.csv:4: more than 2 rows"),
        ("when,price\n1,2\n", {}, r"x\.csv:1: no 'time' \(or 'ts'\) column"),
        ("time,last\n1,2\n", {}, r"x\.csv:1: expected columns time,price or time,open,high"),
        ("time,open,high,low,close\n1,2,2,2,2\n", {}, r"source s: params\.period is required"),
        ("time,open,high,low,close\n1,2,2,x,2\n", {"period": "1MIN"}, r"x\.csv:2: low 'x'"),
        ("time,price\n1,2\n", {"record": "quote"}, r"source s: record 'quote'"),
        ("time,price\n1,2\n", {"align": "later"}, r"source s: align 'later'"),
    ],
)
def test_a_bad_row_or_setting_is_one_located_line(
    tmp_path: Path, text: str, params: dict[str, Any], message: str
) -> None:
    path = tmp_path / "x.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        CsvMarket("s", {"file": str(path), "pair": "ETH-USD", **params})
    assert "\n" not in str(caught.value)


def test_an_unreadable_or_binary_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nothing\.csv: cannot read"):
        CsvMarket("s", {"file": str(tmp_path / "nothing.csv"), "pair": "ETH-USD"})
    path = tmp_path / "x.csv"
    path.write_bytes(b"time,price\n1,2\n2,\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"x\.csv:\d+: not UTF-8 text"):
        CsvMarket("s", {"file": str(path), "pair": "ETH-USD"})
