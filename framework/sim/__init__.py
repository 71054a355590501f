"""The simulated exchange, with no I/O: the venue twin serves it, the paper venue trades on it.

The state machine is :mod:`framework.sim.exchange`; what it reports, :mod:`framework.sim.events`.
"""
