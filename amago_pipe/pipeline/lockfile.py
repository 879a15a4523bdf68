"""The run directory's state: `pipeline.lock.json` (per-stage status and hashes) and the run lock.

Both are written atomically (write a temporary file, then rename), so a run killed at any moment
leaves files the next run understands. Torch-free.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from amago_pipe import __version__
from amago_pipe.errors import LockError, StoreFormatError

LOCK_FORMAT = 1
LOCK_FILE = "pipeline.lock.json"
RUN_LOCK = ".run.lock"


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same folder, fsync and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class StageRecord:
    """What the lock file remembers of one stage."""

    status: str = "never run"
    """never run | running | done | failed | interrupted."""
    config_hash: str = ""
    input_hashes: dict[str, str] = field(default_factory=dict)
    upstream: dict[str, str] = field(default_factory=dict)
    """Output hash of each upstream stage this run consumed."""
    fingerprint: str = ""
    output_hash: str = ""
    started: float | None = None
    ended: float | None = None
    pid: int | None = None
    host: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    version: str = __version__

    @property
    def duration(self) -> float | None:
        return None if self.started is None or self.ended is None else self.ended - self.started


@dataclass
class LockFile:
    """`pipeline.lock.json`: versioned per-stage records of one run directory."""

    path: Path
    stages: dict[str, StageRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: Path) -> LockFile:
        path = run_dir / LOCK_FILE
        if not path.exists():
            return cls(path)
        try:
            data = json.loads(path.read_text())
            if data.get("format", 0) > LOCK_FORMAT:
                raise StoreFormatError(
                    f"{path}: lock file format {data['format']} is newer than this amago-pipe supports "
                    f"({LOCK_FORMAT}); upgrade amago-pipe"
                )
            known = set(StageRecord.__dataclass_fields__)
            stages = {k: StageRecord(**{f: v for f, v in r.items() if f in known}) for k, r in data["stages"].items()}
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise StoreFormatError(
                f"{path}: damaged lock file ({e}); delete it to re-run every stage from scratch"
            ) from e
        return cls(path, stages)

    def record(self, stage: str) -> StageRecord:
        return self.stages.setdefault(stage, StageRecord())

    def save(self) -> None:
        data = {
            "format": LOCK_FORMAT,
            "amago_pipe_version": __version__,
            "stages": {k: asdict(v) for k, v in self.stages.items()},
        }
        write_atomic(self.path, json.dumps(data, indent=2) + "\n")


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_run_lock(run_dir: Path) -> dict[str, Any] | None:
    """The holder of the run lock (`pid`, `host`, `started`), or None when unlocked."""
    try:
        info: dict[str, Any] = json.loads((run_dir / RUN_LOCK).read_text())
        return info
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, OSError):
        return {"pid": None, "host": "?", "started": None}


def lock_is_stale(info: dict[str, Any]) -> bool:
    """A lock is stale when its holder was on this host and is no longer alive."""
    return info.get("host") == socket.gethostname() and not (info.get("pid") and pid_alive(int(info["pid"])))


class RunLock:
    """Exclusive lock of a run directory, held for the duration of one `amago-pipe run`."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.path = run_dir / RUN_LOCK
        self.took_over: dict[str, Any] | None = None

    def acquire(self) -> None:
        """Take the lock; a stale lock (dead PID on this host) is taken over and remembered."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = read_run_lock(self.run_dir) or {}
                if not lock_is_stale(holder):
                    raise LockError(
                        f"{self.run_dir} is locked by another run (pid {holder.get('pid')} on host "
                        f"{holder.get('host')}); wait for it to finish, or if it is gone run "
                        f"`amago-pipe unlock {self.run_dir}`"
                    ) from None
                self.took_over = holder
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(info, f)
            return
        raise LockError(f"could not lock {self.run_dir}; run `amago-pipe unlock {self.run_dir}` and try again")

    def release(self) -> None:
        holder = read_run_lock(self.run_dir)
        if holder and holder.get("pid") == os.getpid():
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
