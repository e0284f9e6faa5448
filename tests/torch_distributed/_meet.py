"""meet(store, world): a store-counter rendezvous, run before init_process_group in the FileStore jobs.

The jobs give their group a short timeout so a designed failure cannot hang, and init_process_group
waits for the other ranks under that same timeout. On a loaded 2-core CI machine one rank can reach
init 20 s or more after its peer (the run of 1b39949: every test of test_all_gather_autograd.py
errored at setup, the job exiting 1). Delaying rank 1 by 25 s before a 20-s init reproduces it: the
first rank fails with "RuntimeError: Wait timeout". Meeting first, under a long bound, keeps the short
timeout for the collectives it was meant for.
"""
from __future__ import annotations

import time


def meet(store, world: int, seconds: float = 180.0, key: str = "pdt_meet") -> None:
    store.add(key, 1)
    deadline = time.monotonic() + seconds
    while store.add(key, 0) < world:
        if time.monotonic() > deadline:
            raise RuntimeError(f"meet: {store.add(key, 0)} of {world} ranks arrived within {seconds:.0f} s")
        time.sleep(0.05)
