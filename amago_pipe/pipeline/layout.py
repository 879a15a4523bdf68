"""Run directory layout: stage folders, superseded outputs, and where the store may (not) live.

`runs/<name>/stages/<stage>/` is owned by the engine (replaced when the stage re-runs); outputs of a
resumable stage that restarts are moved to `superseded/<stage>.<n>/` instead of being deleted. Torch-free.
"""

from __future__ import annotations

import re
from pathlib import Path

from amago_pipe.config.loader import LoadedPipeline
from amago_pipe.errors import ConfigError
from amago_pipe.pipeline.lockfile import is_run_dir

STAGES_DIR = "stages"
SUPERSEDED_DIR = "superseded"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def default_run_dir(loaded: LoadedPipeline) -> Path:
    """`runs/<pipeline name>`."""
    return Path("runs") / loaded.config.name


def stage_dir(run_dir: Path, name: str) -> Path:
    """The output folder of stage `name` in a run directory."""
    return run_dir / STAGES_DIR / name


def superseded_path(run_dir: Path, name: str) -> Path:
    """The next free `superseded/<name>.<n>` folder of `run_dir` for a stage's replaced outputs."""
    root = run_dir / SUPERSEDED_DIR
    taken = [p.name.rpartition(".")[2] for p in root.glob(f"{name}.*")] if root.is_dir() else []
    return root / f"{name}.{max((int(n) for n in taken if n.isdigit()), default=0) + 1}"


def _local(store: str) -> Path | None:
    """The store's folder, resolved; None for a remote URL."""
    if store.startswith("file://"):
        store = store[len("file://") :]
    elif _URL.match(store):
        return None
    return Path(store).expanduser().resolve()


def _shown(path: Path) -> Path:
    """`path` relative to the working directory when it lies below it."""
    cwd = Path.cwd().resolve()
    return path.relative_to(cwd) if path.is_relative_to(cwd) else path


def check_store_placement(loaded: LoadedPipeline, run_dir: Path) -> None:
    """ConfigError when the store lies in `<run_dir>/stages/`, where stage folders are replaced on re-runs."""
    store = loaded.config.store_path
    path = _local(store) if store else None
    stages = (run_dir / STAGES_DIR).resolve()
    if path is None or not path.is_relative_to(stages):
        return
    raise ConfigError(
        f"{loaded.path}: store: '{store}' lies inside {run_dir / STAGES_DIR}/, whose stage folders are replaced "
        f"when their stage re-runs; put it elsewhere, e.g. `store: {run_dir / 'store.zarr'}`",
        path="store",
    )


def store_elsewhere_warning(loaded: LoadedPipeline, run_dir: Path) -> str:
    """A warning when the store lies in another run directory than `run_dir` ('' otherwise).

    `store: runs/${name}/store.zarr` names the default run directory, so `--run-dir` alone does not give
    a run its own data: every run directory of the pipeline reads and appends to the same store.
    """
    store = loaded.config.store_path
    path = _local(store) if store else None
    if path is None or path.is_relative_to(run_dir.resolve()):
        return ""
    default = default_run_dir(loaded).resolve()
    owner = next((p for p in path.parents if p == default or is_run_dir(p)), None)
    if owner is None:
        return ""
    return (
        f"store '{store}' lies in run directory {_shown(owner)}, not in {run_dir}: this run reads and appends to the "
        f"same store as that one; to give {run_dir} its own data, pass --set store={run_dir / 'store.zarr'}"
    )
