"""Paper trading on the live market: the live node's orders filled in-process, never sent.

The simulated venue is the backtest's (:class:`framework.backtest.paper.PaperVenue` and
:class:`framework.backtest.sim_venue.SimVenue`: the twin's exchange, its rules, codes, fees
and fill rule); :mod:`framework.paper.venue` drives it on the wall clock for ``perpframe live
--paper``. A package of its own because the live runtime and the backtest never import each
other: the live node reaches the simulated venue only through here.
"""
