"""Query-string parameters of the twin's endpoints: whole-call refusals, pages, ids, flags.

Shared by the SPEC endpoints (:mod:`framework.twin.app`) and the order-management extension
(:mod:`framework.twin.order_management`), so both read a page or an id the same way:

* A missing or empty required parameter is ``2002 Required parameter:<name>``; a value that
  does not parse is ``2001 Illegal parameter:<name>``.
* pageNo is 1-based (default 1); pageSize has a default and a limit (above it: 2001).
* An id is a positive decimal integer of at most 18 digits; an id list is ids joined by
  commas, with no empty element and at most a given number of them.
* A flag is exactly ``true`` or ``false``.
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.venue.errors import render_message

__all__ = ["Refused", "flag", "id_list", "page", "positive", "required", "required_id"]


class Refused(Exception):
    """A venue error answer for the whole call: its code and filled message."""

    def __init__(self, code: int, *params: object, msg: str | None = None) -> None:
        """The message is the code's SPEC text filled with params unless msg is given."""
        super().__init__(code)
        self.code = code
        self.msg = render_message(code, *params) if msg is None else msg


def positive(value: str | None, default: int | None = None) -> int | None:
    """A positive decimal integer (at most 18 digits), default when absent, None when bad."""
    if value is None or value == "":
        return default
    if value.isascii() and value.isdigit() and len(value) <= 18 and int(value) > 0:
        return int(value)
    return None


def page(params: Mapping[str, str], *, default_size: int, max_size: int) -> tuple[int, int]:
    """pageNo and pageSize, or Refused 2001 naming the bad one."""
    page_no = positive(params.get("pageNo"), 1)
    if page_no is None:
        raise Refused(2001, "pageNo")
    page_size = positive(params.get("pageSize"), default_size)
    if page_size is None or page_size > max_size:
        raise Refused(2001, "pageSize")
    return page_no, page_size


def required(params: Mapping[str, str], name: str) -> str:
    """A parameter that must be present and not empty, or Refused 2002."""
    value = params.get(name)
    if not value:
        raise Refused(2002, name)
    return value


def required_id(params: Mapping[str, str], name: str) -> int:
    """A required positive integer id: Refused 2002 when missing, 2001 when malformed."""
    found = positive(required(params, name))
    if found is None:
        raise Refused(2001, name)
    return found


def id_list(params: Mapping[str, str], name: str, *, limit: int) -> list[int]:
    """Comma-joined ids in the given order: 2002 when missing, 2001 when bad or too many."""
    parts = required(params, name).split(",")
    if len(parts) > limit:
        raise Refused(2001, name)
    ids = [positive(part) for part in parts]
    if any(i is None for i in ids):
        raise Refused(2001, name)
    return [i for i in ids if i is not None]


def flag(params: Mapping[str, str], name: str) -> bool | None:
    """An optional ``true``/``false`` parameter (None when absent or empty), else 2001."""
    value = params.get(name)
    if not value:
        return None
    if value == "true":
        return True
    if value == "false":
        return False
    raise Refused(2001, name)
