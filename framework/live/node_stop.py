"""The node's stop: nothing is left in flight or of unknown fate, within one time budget.

Stop, on SIGINT/SIGTERM, the duration or :meth:`Node.request_stop` (a graceful stop never
makes an order of unknown outcome): timers and polls stop, then the kernel's stop steps run
on the wall clock (:meth:`Kernel.stopping_steps`: in-flight batches answered and a last match
poll, ``Stopping``, ``execution.cancel_on_stop``, the same settling, the engine closed with
9013 for what is still queued), all within ``execution.drain_timeout_s``; then the tasks are
cancelled and the journal is closed. A second signal (:meth:`Stop.force`) skips the
waiting: what is in flight then is UNKNOWN, and a warning says what was skipped.

Apart from the start-up (:mod:`framework.live.node_start`) because the stop owns state of its
own (whether its waiting was cut short, and where) and reads as one protocol.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Final

import anyio

from framework.engine.kernel import Settle
from framework.live.node_start import stop_jobs
from framework.venue.errors import FrameworkError

if TYPE_CHECKING:
    from framework.live.node import Node

__all__ = ["LAST_POLL_TIMEOUT_S", "Stop"]

log = logging.getLogger("framework.node")

LAST_POLL_TIMEOUT_S: Final = 5.0


class Stop:
    """The stop protocol of one node (module docstring), and whether its waiting was skipped."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self.forced = False
        """The stop's waiting was cut short (a second signal)."""
        self.waited = False
        """The stop's waiting is over."""
        self._unknown_at_force = 0
        self._scope: anyio.CancelScope | None = None

    def force(self, why: str) -> None:
        """Skip the rest of the stop's waiting (what a second signal does)."""
        if self.waited:
            log.warning("%s: the stop has nothing left to wait for", why)
            return
        engine = self._node.engine
        if not self.forced:
            self._unknown_at_force = engine.unknown_count if engine is not None else 0
        log.warning("%s: not waiting for the drain", why)
        self.forced = True
        if self._scope is not None:
            self._scope.cancel()

    def report_skipped(self) -> None:
        """One warning saying what the second signal skipped."""
        engine = self._node.engine
        unknown = engine.unknown_count if engine is not None else 0
        log.warning(
            "stop cut short by a second signal: skipped waiting for the answers and the last "
            "match poll; %d order(s) left UNKNOWN by it, %d queued intent(s) refused (9013)",
            max(0, unknown - self._unknown_at_force),
            self._node.kernel.refused,
        )

    async def run(self) -> None:
        """The stop protocol (module docstring): nothing is left in flight or of unknown fate.

        Timers and polls stop; what is queued or in flight is sent and answered, and a last
        poll delivers late fills (strategies may react, and what they submit is sent too);
        then on_stop runs (always) and may still submit, and the same settling follows. Then
        the engine closes: whatever is still queued, and every later submit, is refused with
        9013 and never sent, and what is in flight is answered. All of it within
        ``execution.drain_timeout_s``; a second signal skips the waiting.
        """
        node = self._node
        log.info("stopping", extra={"reason": node.stop_reason})
        stop_jobs(node)
        began = anyio.current_time()
        late = False
        for step in node.kernel.stopping_steps(node.stop_reason):  # the kernel's stop steps
            if isinstance(step, Settle):
                # Shielded from the task group, but a second signal cancels it (Stop.force).
                with self._shielded(began + step.until_s) as scope:
                    await self._settle()
                late |= scope.cancel_called
                continue
            # Drain: what is in flight is answered (or times out at the REST timeout: UNKNOWN
            # then, truthfully), never cut off by the stop.
            with self._shielded(anyio.current_time() + node.config.venue.timeout_s + 1):
                if node.executor is not None and not self.forced:
                    await node.executor.drain(math.inf)
        timeout = node.config.execution.drain_timeout_s
        if late and not self.forced:
            log.warning("stop: drain_timeout_s %.1f s passed with work outstanding", timeout)
        if node.journal is not None:
            for coin in node.config.coins():
                log_id = node.portfolio.log_id(coin)
                if log_id is not None:
                    node.journal.set_log_id(coin, log_id)

    def _shielded(self, deadline: float) -> anyio.CancelScope:
        """A shielded scope ending at deadline, which a second signal cancels."""
        self._scope = anyio.CancelScope(shield=True, deadline=deadline)
        if self.forced:
            self._scope.cancel()
        return self._scope

    async def _settle(self, rounds: int = 3) -> None:
        """Drain the executor and poll the matches until a poll provokes no new intent."""
        node = self._node
        executor, poller, engine = node.executor, node.poller, node.engine
        for _ in range(rounds):
            if self.forced or executor is None or engine is None:
                return
            await executor.drain(math.inf)
            if poller is None:
                return
            with anyio.move_on_after(LAST_POLL_TIMEOUT_S):
                try:
                    await poller.poll_now()
                except (FrameworkError, OSError) as exc:
                    log.warning("last match poll failed", extra={"error": str(exc)})
            if engine.idle:
                return
