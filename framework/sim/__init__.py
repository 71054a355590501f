"""The simulated exchange, with no I/O: the venue twin serves it, the paper venue trades on it.

:mod:`~framework.sim.exchange` (the state machine), :mod:`~framework.sim.fills` (arrival,
fills, resting orders, liquidation), :mod:`~framework.sim.book`, :mod:`~framework.sim.state`
(settings, accounts, markets, savepoints), :mod:`~framework.sim.history` (matches and order
records, bounded) and :mod:`~framework.sim.events` (what it reports, as venue records too).
"""
