"""The twin's match list (SPEC 4.4): one page of an account's matches, newest first.

``matchId`` is a strict upper bound, pages are counted from 1. A match the match_delay fault
holds back (``Account.listed_from_ms``) is not listed before its time: pages count listed
matches only, so a lower id may appear after a higher one was already read. Pure: the time
is passed in.

Only the matches the account still keeps are listed: the newest ``match_history_limit``
(default 100000) per pair (:mod:`framework.twin.match_history`, the twin's choice where the
venue's documentation is silent). Older ones drop off the bottom: the pages of the newest
matches and the ids they carry are unchanged, a page below the oldest kept match is short
or empty, as at the start of an account's history.
"""

from __future__ import annotations

from framework.twin.events import Match
from framework.twin.state import Account

__all__ = ["list_page"]


def list_page(
    account: Account,
    pair: str,
    *,
    before: int | None,
    page_no: int,
    page_size: int,
    now_ms: int | None = None,
) -> list[Match]:
    """One page of the matches listed at now_ms (None: all), newest first, ids < before."""
    found = account.matches.get(pair)
    if not found:
        return []
    end = len(found) if before is None else found.count_below(before)
    held = account.listed_from_ms
    if held and now_ms is not None:
        for match_id in [i for i, at in held.items() if at <= now_ms]:
            del held[match_id]
    if not held or now_ms is None:
        high = end - (page_no - 1) * page_size
        if high <= 0:
            return []
        return found[max(0, high - page_size) : high][::-1]
    skip = (page_no - 1) * page_size
    page: list[Match] = []
    for index in range(end - 1, -1, -1):
        match = found[index]
        if match.id in held:
            continue
        if skip:
            skip -= 1
            continue
        page.append(match)
        if len(page) == page_size:
            break
    return page
