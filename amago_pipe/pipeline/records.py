"""Result records: the small, versioned JSON an evaluate stage writes (`record.json`) and benchmarks/records/ keeps.

One schema for both: a run's figure (task, encoder, agent, seed, budget, headline metrics, per-task values, the
command that reproduces it) or a benchmark's table. Also the run's invocation (`command.json`) and the git commit.
Torch-free; no click.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from amago_pipe.errors import DataError, did_you_mean
from amago_pipe.pipeline.lockfile import write_atomic

RECORD_VERSION = 1
RECORD_FILE = "record.json"
COMMAND_FILE = "command.json"
"""In the run directory: the pipeline path and `--set` overrides of the latest `amago-pipe run` there."""
KINDS = ("result", "benchmark")


@dataclass(frozen=True, kw_only=True)
class Record:
    """One figure of one run (`kind: result`) or one measured table (`kind: benchmark`)."""

    version: int = RECORD_VERSION
    """Format version of this record; readers refuse newer ones."""
    kind: str = "result"
    """`result` (a run's figure) or `benchmark` (a table of measurements in `table`)."""
    family: str = ""
    """The task family it belongs to (a section of benchmarks/RESULTS.md), e.g. `T-Maze`."""
    task: str = ""
    """The env id or task set it was measured on, with what sets it apart (e.g. `corridor 100`)."""
    variant: str = ""
    """What this run changes from the pipeline as committed (e.g. `1,800 episodes`); '' for none."""
    encoder: dict[str, str] = field(default_factory=dict)
    """`{"tstep": ..., "traj": ...}`: the timestep and trajectory encoder types."""
    agent: dict[str, Any] = field(default_factory=dict)
    """`{"type": ..., "recipe": default | memory | custom, "changed": {key: value}}` (keys off the defaults)."""
    seed: int | None = None
    """The pipeline seed of the run."""
    updates: int | None = None
    """Gradient updates the evaluated policy was trained for."""
    env_steps: int | None = None
    """Env steps collected online by the train stage (None offline)."""
    metrics: dict[str, float | None] = field(default_factory=dict)
    """Headline metrics: `return_mean`, `success_rate`, ... (training tasks only when some are held out)."""
    tasks: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """Per-task metrics of the training tasks (task sets only)."""
    held_out: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """Per-task metrics of the held-out tasks, and `mean over tasks` for their group."""
    learned: bool | None = None
    """Whether the task counts as learned at this budget (curated records); None when not judged."""
    command: str = ""
    """The command that reproduces it."""
    source: str = ""
    """Where the figure comes from: a run directory, or a section of benchmarks/RESULTS_ARCHIVE.md."""
    git_commit: str | None = None
    """The commit of the code that ran (`+dirty` when it had uncommitted changes); None without git."""
    date: str = ""
    """When it was measured (YYYY-MM-DD)."""
    machine: str = ""
    """What it ran on (e.g. `2-core CPU`, `H100`)."""
    notes: str = ""
    """One or two sentences a reader needs beside the numbers."""
    table: dict[str, Any] = field(default_factory=dict)
    """`kind: benchmark`: `{"title": ..., "columns": [...], "rows": [[...], ...]}`."""
    run: dict[str, Any] = field(default_factory=dict)
    """Written by the evaluate stage: `stage`, `train_stage`, `checkpoint`, `epoch`, `episodes`."""

    def to_json(self) -> dict[str, Any]:
        """Plain data, empty fields left out (version and kind always kept)."""
        data = asdict(self)
        return {k: v for k, v in data.items() if k in ("version", "kind") or v not in ("", None, {}, [])}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Record:
        """A record from parsed JSON; DataError naming `where` and the key when it does not fit the schema."""
        if not isinstance(data, dict):
            raise DataError(f"{where}: a record is a JSON object, found {type(data).__name__}")
        version = data.get("version")
        if not isinstance(version, int) or version < 1:
            raise DataError(f"{where}: `version` must be a positive integer, found {version!r}")
        if version > RECORD_VERSION:
            raise DataError(
                f"{where}: record version {version} is newer than this amago-pipe reads ({RECORD_VERSION}); upgrade"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DataError(f"{where}: unknown key '{unknown[0]}'{did_you_mean(unknown[0], sorted(known))}")
        if data.get("kind", "result") not in KINDS:
            raise DataError(f"{where}: `kind` must be one of {', '.join(KINDS)}, found {data.get('kind')!r}")
        _check_types(data, where)
        return cls(**data)


_TYPES: dict[str, tuple[type, ...]] = {
    "family": (str,),
    "task": (str,),
    "variant": (str,),
    "encoder": (dict,),
    "agent": (dict,),
    "seed": (int, type(None)),
    "updates": (int, type(None)),
    "env_steps": (int, type(None)),
    "metrics": (dict,),
    "tasks": (dict,),
    "held_out": (dict,),
    "learned": (bool, type(None)),
    "command": (str,),
    "source": (str,),
    "git_commit": (str, type(None)),
    "date": (str,),
    "machine": (str,),
    "notes": (str,),
    "table": (dict,),
    "run": (dict,),
}


def _check_types(data: dict[str, Any], where: str) -> None:
    for key, types in _TYPES.items():
        if key in data and not isinstance(data[key], types):
            expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise DataError(f"{where}: `{key}` must be {expected}, found {data[key]!r}")
    table = data.get("table") or {}
    if data.get("kind") == "benchmark":
        rows, columns = table.get("rows"), table.get("columns")
        if not isinstance(columns, list) or not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise DataError(f"{where}: a benchmark's `table` needs `columns` (a list) and `rows` (a list of lists)")
        wrong = [i for i, r in enumerate(rows) if len(r) != len(columns)]
        if wrong:
            raise DataError(f"{where}: table row {wrong[0]} has {len(rows[wrong[0]])} cells, not {len(columns)}")


def read_record(path: Path) -> Record:
    """The record in `path`; DataError when it is missing, not JSON or off the schema."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise DataError(f"{path}: cannot read the record ({e.strerror or e})") from e
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not JSON ({e})") from e
    return Record.from_json(data, str(path))


def write_record(path: Path, record: Record) -> None:
    """Write `record` as indented JSON (keys in schema order)."""
    Path(path).write_text(json.dumps(record.to_json(), indent=1, ensure_ascii=False) + "\n")


# ---- the run's invocation and the code's commit ---------------------------------------------------


def write_command(run_dir: Path, pipeline: Path, overrides: tuple[str, ...] | list[str]) -> None:
    """Record how this run was invoked (`command.json`): the pipeline file as given and its `--set` overrides."""
    data = {"format": 1, "pipeline": str(pipeline), "run_dir": str(run_dir), "overrides": list(overrides)}
    write_atomic(run_dir / COMMAND_FILE, json.dumps(data, indent=1) + "\n")


def read_command(run_dir: Path) -> dict[str, Any] | None:
    """The recorded invocation of `run_dir` (None for a run made before it was recorded, or a damaged file)."""
    try:
        data = json.loads((run_dir / COMMAND_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and "pipeline" in data else None


def command_line(invocation: dict[str, Any] | None) -> str:
    """`amago-pipe run PIPELINE --run-dir DIR --set ...` from a recorded invocation ('' when there is none)."""
    if not invocation:
        return ""
    words = ["amago-pipe", "run", str(invocation["pipeline"])]
    if invocation.get("run_dir"):
        words += ["--run-dir", str(invocation["run_dir"])]
    for item in invocation.get("overrides", []):
        words += ["--set", str(item)]
    return shlex.join(words)


def git_commit(folder: Path | None = None) -> str | None:
    """The commit checked out where the code lives (`<sha>+dirty` with uncommitted changes); None without git."""
    where = str(folder or Path(__file__).resolve().parent)
    try:
        sha = subprocess.run(
            ["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}+dirty" if sha and dirty else sha or None
