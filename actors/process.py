"""What a long-lived process of the project does once it has started.

Python's cycle collector walks every object it tracks in a full collection.
A server process holds 100,000-150,000 of them from its imports alone (the
modules, classes and functions of Ray, FastAPI, pydantic, the SDKs), and
they never become garbage; walking them made a full collection take
40-75 ms on a 2-core machine, a pause in whatever turn or frame the process
was handling at that moment (it showed as the one-group p99 of
``bench/latency.py``). :func:`settle` moves everything alive once a process
has started into the collector's permanent generation, so that later
collections walk only what the process made since.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect start-up garbage once, then exempt what is left from later collections."""
    gc.collect()
    gc.freeze()
