"""When to send: the batch cutter, the token bucket of calls per second, retry backoff.

Pure logic, time passed in as integer milliseconds. A batch is cut when ``max_size``
intents wait or when the oldest has waited ``linger_ms`` (0 = at once), as long as fewer
than ``max_inflight`` batches are in flight and the token bucket has a token. Intents leave
in the order they were queued, so each strategy's intents keep their order. A batch waiting
to be retried goes out before any new batch is cut, and while one waits no new batch is
cut: the venue said it is busy, and newer intents must not overtake older ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Batcher", "TokenBucket", "backoff_s"]

T = TypeVar("T")
B = TypeVar("B")


class TokenBucket:
    """calls_per_second tokens a second, at most ``capacity`` saved (a burst)."""

    __slots__ = ("_last_ms", "_tokens", "capacity", "rate")

    def __init__(self, calls_per_second: float, *, capacity: float | None = None) -> None:
        if not calls_per_second > 0:
            raise ValueError(f"calls_per_second must be positive, got {calls_per_second!r}")
        self.rate = calls_per_second
        self.capacity = capacity if capacity is not None else max(1.0, calls_per_second / 10)
        self._tokens = self.capacity
        self._last_ms: int | None = None

    def _refill(self, now_ms: int) -> None:
        last = self._last_ms
        if last is not None and now_ms > last:
            self._tokens = min(self.capacity, self._tokens + (now_ms - last) * self.rate / 1000)
        if last is None or now_ms > last:
            self._last_ms = now_ms

    def take(self, now_ms: int) -> bool:
        """Take one token if there is one."""
        self._refill(now_ms)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait_ms(self, now_ms: int) -> int:
        """Milliseconds until a token is available (0 if one is)."""
        self._refill(now_ms)
        missing = 1.0 - self._tokens
        if missing <= 0:
            return 0
        return max(1, int(missing * 1000 / self.rate + 0.999))


def backoff_s(attempt: int, *, base_s: float, max_s: float, random: Callable[[], float]) -> float:
    """Delay before retry number attempt (1, 2, ...): capped exponential, equal jitter."""
    ceiling = min(max_s, base_s * (2.0 ** (attempt - 1)))
    return ceiling / 2 + ceiling / 2 * random()


class Batcher(Generic[T, B]):
    """Queues items (intents) and decides when a batch is cut; knows nothing of their content."""

    __slots__ = (
        "_bucket",
        "_retries",
        "inflight",
        "linger_ms",
        "max_inflight",
        "max_size",
        "queue",
        "queued_ms",
    )

    def __init__(
        self,
        *,
        linger_ms: int,
        max_inflight: int,
        calls_per_second: float,
        max_size: int,
    ) -> None:
        if linger_ms < 0 or max_inflight < 1 or max_size < 1:
            raise ValueError("linger_ms >= 0, max_inflight >= 1 and max_size >= 1 are required")
        self.linger_ms = linger_ms
        self.max_inflight = max_inflight
        self.max_size = max_size
        self._bucket = TokenBucket(calls_per_second)
        self.queue: deque[T] = deque()
        self.queued_ms: deque[int] = deque()
        self._retries: deque[tuple[int, B]] = deque()
        self.inflight = 0

    def push(self, item: T, now_ms: int) -> None:
        """Queue an item at the back."""
        self.queue.append(item)
        self.queued_ms.append(now_ms)

    def remove(self, item: T) -> bool:
        """Take a queued item out of the queue (identity); False when it is not queued."""
        for i, queued in enumerate(self.queue):
            if queued is item:
                del self.queue[i]
                del self.queued_ms[i]
                return True
        return False

    @property
    def retrying(self) -> int:
        """How many batches wait to be retried."""
        return len(self._retries)

    def retry_later(self, batch: B, ready_ms: int) -> None:
        """A batch left flight to be retried at ready_ms (kept in the order of failure)."""
        self.inflight -= 1
        self._retries.append((ready_ms, batch))

    def take_waiting(self) -> tuple[list[T], list[B]]:
        """Remove and return every queued item and every batch waiting for a retry."""
        items = list(self.queue)
        self.queue.clear()
        self.queued_ms.clear()
        retries = [batch for _, batch in self._retries]
        self._retries.clear()
        return items, retries

    def done(self) -> None:
        """A batch in flight got its outcome."""
        self.inflight -= 1

    def take_retry(self, now_ms: int) -> B | None:
        """The oldest batch due for retry, if flight room and a token allow; it is in flight."""
        retries = self._retries
        if not retries or retries[0][0] > now_ms or self.inflight >= self.max_inflight:
            return None
        if not self._bucket.take(now_ms):
            return None
        self.inflight += 1
        return retries.popleft()[1]

    def cut(self, now_ms: int) -> list[T] | None:
        """The next batch of at most max_size items if it is due, else None; it is in flight."""
        queue = self.queue
        if not queue or self._retries or self.inflight >= self.max_inflight:
            return None
        size = len(queue)
        if size < self.max_size and now_ms - self.queued_ms[0] < self.linger_ms:
            return None
        if not self._bucket.take(now_ms):
            return None
        self.inflight += 1
        n = min(size, self.max_size)
        queued_ms = self.queued_ms
        if n == size:
            items = list(queue)
            queue.clear()
            queued_ms.clear()
            return items
        popleft = queue.popleft
        items = [popleft() for _ in range(n)]
        for _ in range(n):
            queued_ms.popleft()
        return items

    def next_due_ms(self, now_ms: int) -> int | None:
        """Milliseconds until cut() or take_retry() may succeed; None if only an outcome can."""
        if self.inflight >= self.max_inflight:
            return None
        if self._retries:
            wait = self._retries[0][0] - now_ms
        elif self.queue:
            wait = 0
            if len(self.queue) < self.max_size:
                wait = self.queued_ms[0] + self.linger_ms - now_ms
        else:
            return None
        return max(wait, self._bucket.wait_ms(now_ms), 0)
