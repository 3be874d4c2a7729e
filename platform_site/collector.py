"""The cyclic garbage collector under daphne: what start-up made is out of its full sweeps.

A full collection (generation 2) walks every container object the collector tracks,
and it runs on the event loop, between two callbacks: every session's events wait for
it. A web process holds some 200,000 such objects once Django, the apps and the
providers are imported, and they live as long as the process; each full collection
walked them all again, about 100-250 ms on this project's 2-core machine, which was the
tail of event latency under load (docs/capacity.md, "The tail"). Frozen once the server
runs (``gc.freeze``: the permanent generation, never collected), a full collection walks
only what was made since, the sessions' own objects. Young collections are unchanged.
"""

from __future__ import annotations

import gc
import sys


def freeze() -> None:
    """Collect what start-up left unreachable, then set the rest aside for good."""
    gc.collect()
    gc.freeze()


def freeze_start_up_in_daphne() -> None:
    """Under daphne, freeze once the reactor runs (every import and warm-up done). Other
    servers, and tests, keep the collector as it is."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:
        return
    reactor.callWhenRunning(freeze)
