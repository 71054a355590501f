"""Incidents: a live session bundled (``perpframe incident export``) and replayed
(``perpframe incident replay``) through the same kernel, with a step-by-step comparison.

Why a package: an owner who saw a bot do something surprising needs that moment again, on
their own machine, with a check that what they see is what happened. The parts are one concept
each: the bundle and its manifest (:mod:`framework.incident.bundle`), what goes into it
(:mod:`framework.incident.export`), the venue a replay trades on (:mod:`framework.incident.venue`:
the live journal's answers, nothing sent), the replay (:mod:`framework.incident.replay`), the
comparison (:mod:`framework.incident.compare`) and the command (:mod:`framework.incident.cli`).
"""

from __future__ import annotations
