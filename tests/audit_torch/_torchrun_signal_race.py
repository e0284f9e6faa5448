"""torchrun with SIGTERM delivered inside the metrics wrapper's window; for test_torch_audit.py.

torch/distributed/elastic/metrics/api.py `prof` wraps agent methods as
``try: start = time.time(); result = f(...) ... finally: put_metric(..., get_elapsed_time_ms(start))``.
A signal whose handler runs before ``start`` is bound leaves ``finally`` reading an unbound local, so the
agent's SignalException turns into ``UnboundLocalError: cannot access local variable 'start'``.  In a real
job that needs the signal to land in that window by chance (seen once in CI on a loaded 2-core machine);
here the agent sends SIGTERM to itself from the ``time.time()`` call that binds ``start`` in the wrapper
around ``_monitor_workers``, once, after both workers have written their ready files.  Everything else is
the real torchrun (``torch.distributed.run.main``) with the real signal handler.

Every run also leaves ``rdzv_shutdown`` in the working directory when the agent closes its rendezvous
(a pass-through wrapper around ``DynamicRendezvousHandler.shutdown``, which logs nothing at torchrun's
log level), so a test can tell whether ``launch_agent`` closed it.

Usage: python _torchrun_signal_race.py {window|plain} TORCHRUN-ARGS...
  window  the agent signals itself inside the wrapper's window, as above
  plain   no injection: send SIGTERM to this process from outside, as a scheduler would
"""
import os
import signal
import sys
import time as _time
from pathlib import Path

import torch.distributed.elastic.metrics.api as metrics_api
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler
from torch.distributed.run import main


class _Clock:
    """Stands in for the `time` module inside metrics/api.py only."""
    fired = False

    def __getattr__(self, name):
        return getattr(_time, name)

    def time(self):
        caller = sys._getframe(1)
        wrapped = caller.f_locals.get("f")
        if (not _Clock.fired and caller.f_code.co_name == "wrapper"
                and getattr(wrapped, "__name__", "") == "_monitor_workers"
                and all(Path(f"ready_rank{r}_attempt0").exists() for r in (0, 1))):
            _Clock.fired = True
            os.kill(os.getpid(), signal.SIGTERM)
        return _time.time()


_shutdown = DynamicRendezvousHandler.shutdown


def _marked_shutdown(self):
    Path("rdzv_shutdown").touch()
    return _shutdown(self)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode not in ("window", "plain"):
        sys.exit(f"mode must be window or plain, not {mode!r}")
    if mode == "window":
        metrics_api.time = _Clock()
    DynamicRendezvousHandler.shutdown = _marked_shutdown
    sys.argv = ["torchrun", *args]
    main()
