"""The run directory's state: `pipeline.lock.json` (per-stage status and hashes) and the run lock.

Both are written atomically (write a temporary file, then rename), so a run killed at any moment
leaves files the next run understands. Torch-free.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from amago_pipe import __version__
from amago_pipe.errors import LockError, StoreFormatError
from amago_pipe.processes import alive_here, other_process_alive

LOCK_FORMAT = 1
LOCK_FILE = "pipeline.lock.json"
RUN_LOCK = ".run.lock"
RUN_LOCK_GUARD = ".run.lock.guard"
"""Never deleted: processes taking the run lock hold an flock on it, so one stale-lock takeover wins."""
RUN_ID_FILE = ".run_id"
"""A copy of the lock file's run id, so a run directory keeps its identity when its lock file is deleted."""


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same folder, fsync and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}.{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # e.g. disk full: remove the partial copy, name the file (a failed write() does not)
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from e


def remove_dead_temps(folder: Path) -> list[Path]:
    """Delete the `write_atomic` temporaries (`.tmp-<name>.<pid>`) in `folder` whose writer is dead; return them."""
    removed = []
    for path in folder.glob(".tmp-*.*"):
        pid = path.name.rsplit(".", 1)[1]
        if path.is_file() and pid.isdigit() and not other_process_alive(int(pid)):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@dataclass
class StageRecord:
    """What the lock file remembers of one stage."""

    status: str = "never run"
    """never run | running | done | failed | interrupted."""
    config_hash: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    """What `config_hash` hashes (stage config, pipeline store and seed): names the keys a change touched."""
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


def kept_run_id(run_dir: Path) -> str:
    """The run id in the run directory's `RUN_ID_FILE` ('' when there is none)."""
    with contextlib.suppress(OSError):
        return (run_dir / RUN_ID_FILE).read_text().strip()
    return ""


def new_run_id(run_dir: Path) -> str:
    """A new run id: the run directory's name (letters, digits, `._-` kept) and 6 random hex digits."""
    return f"{re.sub(r'[^A-Za-z0-9._-]', '-', Path(run_dir).resolve().name)[:40]}-{secrets.token_hex(3)}"


def tagged(label: str, run_id: str) -> str:
    """`<label>@<run id>`, the tag of a run's store segments; just `label` for a run without an id."""
    return f"{label}@{run_id}" if run_id else label


@dataclass
class LockFile:
    """`pipeline.lock.json`: versioned per-stage records of one run directory."""

    path: Path
    stages: dict[str, StageRecord] = field(default_factory=dict)
    run_id: str = ""
    """The run directory's identity, made with its lock file and kept for good (also in `RUN_ID_FILE`, should the
    lock file be deleted): the stages tag their store segments with it, so runs sharing a store never take each
    other's data for their own. '' in a lock file written before run ids (its stages keep tagging segments
    `<pipeline>/<stage>`, as they did)."""

    @classmethod
    def load(cls, run_dir: Path) -> LockFile:
        path = run_dir / LOCK_FILE
        if not path.exists():
            return cls(path, run_id=kept_run_id(run_dir) or new_run_id(run_dir))
        try:
            data = json.loads(path.read_text())
            if data.get("format", 0) > LOCK_FORMAT:
                raise StoreFormatError(
                    f"{path}: lock file format {data['format']} is newer than this amago-pipe supports "
                    f"({LOCK_FORMAT}); upgrade amago-pipe"
                )
            known = set(StageRecord.__dataclass_fields__)
            stages = {k: StageRecord(**{f: v for f, v in r.items() if f in known}) for k, r in data["stages"].items()}
            run_id = str(data.get("run_id") or "")
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise StoreFormatError(
                f"{path}: damaged lock file ({e}); delete it to re-run every stage from scratch"
            ) from e
        return cls(path, stages, run_id)

    def record(self, stage: str) -> StageRecord:
        return self.stages.setdefault(stage, StageRecord())

    def save(self) -> None:
        data = {
            "format": LOCK_FORMAT,
            "amago_pipe_version": __version__,
            **({"run_id": self.run_id} if self.run_id else {}),
            "stages": {k: asdict(v) for k, v in self.stages.items()},
        }
        write_atomic(self.path, json.dumps(data, indent=2) + "\n")
        if self.run_id and kept_run_id(self.path.parent) != self.run_id:
            write_atomic(self.path.parent / RUN_ID_FILE, self.run_id + "\n")


def effective_status(record: StageRecord) -> str:
    """The record's status, `interrupted` for a `running` stage whose process on this host is gone."""
    if (
        record.status == "running"
        and record.host == socket.gethostname()
        and not alive_here(record.host, record.pid, record.started)
    ):
        return "interrupted"
    return record.status


def is_run_dir(path: Path) -> bool:
    """True when `path` holds a lock file or a run lock."""
    return (path / LOCK_FILE).is_file() or (path / RUN_LOCK).is_file()


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
    host = str(info.get("host"))
    return host == socket.gethostname() and not alive_here(host, info.get("pid"), info.get("started"))


@contextmanager
def _guard(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (released by the kernel if the process dies)."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class RunLock:
    """Exclusive lock of a run directory, held for the duration of one `amago-pipe run`."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.path = run_dir / RUN_LOCK
        self.took_over: dict[str, Any] | None = None

    def acquire(self) -> None:
        """Take the lock; a stale lock (dead PID on this host) is taken over and remembered.

        Check and write happen under an flock on `RUN_LOCK_GUARD`, so of several processes that find
        the same stale lock exactly one takes it over.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with _guard(self.run_dir / RUN_LOCK_GUARD):
            remove_dead_temps(self.run_dir)
            holder = read_run_lock(self.run_dir)
            if holder is not None and not lock_is_stale(holder):
                raise LockError(
                    f"{self.run_dir} is locked by another run (pid {holder.get('pid')} on host "
                    f"{holder.get('host')}); wait for it to finish, or if it is gone run "
                    f"`amago-pipe unlock {self.run_dir}`"
                )
            self.took_over = holder
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
            write_atomic(self.path, json.dumps(info))

    def release(self) -> None:
        holder = read_run_lock(self.run_dir)
        if holder and holder.get("pid") == os.getpid():
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
