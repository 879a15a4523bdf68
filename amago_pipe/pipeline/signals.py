"""SIGINT/SIGTERM during a run: the first asks the running stage to stop after its current step, a second stops now.

Handlers are installed only in the main thread and restored on exit. Prints nothing (a log warning).
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from amago_pipe.errors import Interrupted

log = logging.getLogger("amago_pipe")


class StopOnSignal:
    """Context manager: SIGINT/SIGTERM set `stop_event` (and `signum`); a second one raises Interrupted."""

    def __init__(self, stop_event: threading.Event):
        self.stop_event = stop_event
        self.signum = 0
        """The signal that asked the run to stop (0: none)."""
        self.saved: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, self.handle)
        return self

    def handle(self, signum: int, frame: Any) -> None:
        if self.stop_event.is_set():  # second signal: stop now
            raise Interrupted("stopped", signum=signum)
        self.signum = signum
        self.stop_event.set()
        log.warning(
            "received %s: stopping after the current step (send again to stop now)", signal.Signals(signum).name
        )

    def __exit__(self, *exc: object) -> None:
        for sig, old in self.saved.items():
            signal.signal(sig, old)
        self.saved.clear()
