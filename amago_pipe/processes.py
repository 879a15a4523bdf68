"""Is a process alive? One answer for locks, checkpoint debris and store leftovers.

Standard library only (the lowest layer): a PID on this host is alive when `os.kill(pid, 0)` finds it and, given
when it was recorded, it had started by then (a reused PID is not the recorded process; Linux /proc).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

START_SLACK_S = 30.0
"""/proc's start times are whole seconds since boot, and clocks step: a process that started this much later than
it was recorded still counts as the recorded one."""


def pid_alive(pid: int, since: float | None = None) -> bool:
    """True when process `pid` exists on this host (and, given `since`, was started by then: not a reused PID)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by another user
    if not since:
        return True
    started = process_start_time(pid)
    return started is None or started <= since + START_SLACK_S


def alive_here(host: str, pid: int | None, since: float | None = None) -> bool:
    """True when `pid` recorded on `host` is a live process of this host (see `pid_alive`)."""
    if host != socket.gethostname() or not pid:
        return False
    return pid_alive(int(pid), since)


def other_process_alive(pid: int) -> bool:
    """True when `pid` is a live process of this host other than this one."""
    return pid != os.getpid() and pid_alive(pid)


def process_start_time(pid: int) -> float | None:
    """When `pid` started (epoch seconds, Linux /proc); None where unknown."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")
