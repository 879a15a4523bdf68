"""Training checkpoints: full state (weights, optimiser, schedule, RNG, sampler, counters), written atomically.

Layout under a stage's `checkpoints/`: `latest/` (every epoch), `epoch_NNNN/` (every `ckpt_interval`), `best/`
(the validation-best epoch), each with `model.safetensors`, `optimizer.safetensors` and `state.json`. Tensors
go to safetensors, the rest to JSON; nothing is pickled. A writer works in `.tmp-<name>-<pid>` and renames;
what a killed writer left is removed by the next save (or resume). Imports torch and safetensors, never the
pipeline or the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from amago_pipe.errors import DataError, StoreFormatError, out_of_space, out_of_space_error
from amago_pipe.processes import other_process_alive

CHECKPOINT_FORMAT = 1
"""Version of the checkpoint layout; a newer one is refused with a clear message."""
LATEST = "latest"
BEST = "best"
"""The full checkpoint of the validation-best epoch (kept beside `latest` when the stage validates)."""
TMP_PREFIX = ".tmp-"


@dataclass
class TrainingState:
    """Counters and non-tensor state saved with every checkpoint."""

    epoch: int = 0
    """Epochs completed."""
    step: int = 0
    """Gradient steps completed."""
    timesteps: int = 0
    """Training timesteps consumed (windows x steps, all processes)."""
    wall_time: float = 0.0
    """Seconds spent training, summed over runs (resumes included)."""
    sampler: dict[str, Any] = field(default_factory=dict)
    best: dict[str, Any] = field(default_factory=dict)
    """Best validation so far: {"epoch": .., "return_mean" or "success_rate": .., "since": ..} (`train.best`)."""
    elapsed: float = 0.0
    """Seconds of the whole loop (collection, updates, validation, checkpoints), summed over runs."""
    online: dict[str, Any] = field(default_factory=dict)
    """Online collection: counters, exploration schedule, sampling stream (empty when offline)."""

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _STATE_KEYS}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainingState:
        return cls(**{k: d[k] for k in _STATE_KEYS if k in d})


_STATE_KEYS = ("epoch", "step", "timesteps", "wall_time", "elapsed", "sampler", "best", "online")


# ---- RNG --------------------------------------------------------------------------------------


def rng_state() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Torch (CPU and CUDA) generator states as tensors, Python's `random` state as JSON."""
    tensors = {"rng.torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.torch_cuda.{i}"] = s
    version, internal, gauss = random.getstate()
    return tensors, {"python": [version, list(internal), gauss], "numpy_legacy": _np_legacy_state()}


def set_rng_state(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Restore what `rng_state` saved."""
    torch.set_rng_state(tensors["rng.torch_cpu"])
    cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("rng.torch_cuda."))]
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    if "python" in meta:
        version, internal, gauss = meta["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy_legacy" in meta:
        name, keys, pos, has_gauss, cached = meta["numpy_legacy"]
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))


def _np_legacy_state() -> list[Any]:
    state: Any = np.random.get_state()
    name, keys, pos, has_gauss, cached = state
    return [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]


# ---- optimiser state as tensors + JSON --------------------------------------------------------


def optimizer_to_flat(opt_state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split `optimizer.state_dict()` into safetensors-able tensors and JSON."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, slots in opt_state["state"].items():
        for name, value in slots.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{idx}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[name] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in opt_state["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def optimizer_from_flat(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Inverse of `optimizer_to_flat`."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        _, idx, name = key.split(".", 2)
        state.setdefault(int(idx), {})[name] = value
    for idx, slots in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(slots)
    groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items()} for g in meta["param_groups"]]
    return {"state": state, "param_groups": groups}


# ---- writing and reading ----------------------------------------------------------------------


@dataclass
class Checkpoint:
    """One loaded checkpoint."""

    path: Path
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    state: TrainingState
    rng_tensors: dict[str, torch.Tensor]
    rng_meta: dict[str, Any]
    meta: dict[str, Any]


def save_checkpoint(
    directory: Path,
    *,
    model: dict[str, torch.Tensor],
    optimizer: dict[str, Any],
    scheduler: dict[str, Any],
    state: TrainingState,
    meta: dict[str, Any],
) -> None:
    """Write a full checkpoint to `directory` atomically (a temp folder renamed into place).

    On failure nothing is left behind and the previous checkpoint stays readable; OutOfSpaceError (one line
    naming `directory`) when the disk, a quota or the file-size limit is full.
    """
    directory = Path(directory)
    clean_debris(directory.parent)
    tmp = _tmp_path(directory)
    with _writing(directory, tmp):
        tmp.mkdir(parents=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in model.items()}, str(tmp / "model.safetensors"))
        opt_tensors, opt_meta = optimizer_to_flat(optimizer)
        rng_tensors, rng_meta = rng_state()
        save_file({**opt_tensors, **rng_tensors}, str(tmp / "optimizer.safetensors"))
        doc = {
            "format": CHECKPOINT_FORMAT,
            "state": state.to_json(),
            "optimizer": opt_meta,
            "scheduler": scheduler,
            "rng": rng_meta,
            "meta": meta,
        }
        _write_json(tmp / "state.json", doc)
        replace_dir(tmp, directory)


def replace_dir(new: Path, target: Path) -> None:
    """Move folder `new` to `target`, replacing it; a crash leaves either the old or the new folder readable."""
    old = _old_path(target)
    if target.exists():
        if old.exists():  # a stale copy: `target` is the readable one
            shutil.rmtree(old)
        os.replace(target, old)
    os.replace(new, target)  # an `old` left by a crash mid-replace stays until `target` is back
    if old.exists():
        shutil.rmtree(old)
    _fsync_dir(target.parent)


def clean_debris(folder: Path) -> list[Path]:
    """Delete what killed writers left in `folder`; return the deleted paths.

    That is every `.tmp-<name>-<pid>` whose process is gone (or is this one: it is not writing now) and every
    `.tmp-old-<name>` copy whose `<name>` is back. An old copy whose `<name>` is missing is kept: `resolve`
    reads it, and the next save of `<name>` replaces it.
    """
    folder = Path(folder)
    deleted: list[Path] = []
    if not folder.is_dir():
        return deleted
    for path in folder.iterdir():
        if not path.name.startswith(TMP_PREFIX):
            continue
        rest = path.name[len(TMP_PREFIX) :]
        name, _, pid = rest.rpartition("-")
        if rest.startswith("old-"):
            doomed = (folder / rest[len("old-") :]).exists()
        else:
            doomed = bool(name) and pid.isdigit() and not other_process_alive(int(pid))
        if doomed and _remove(path):
            deleted.append(path)
    return deleted


def resolve(directory: Path) -> Path | None:
    """The readable checkpoint folder for `directory` (falls back to the copy a crash left mid-replace)."""
    directory = Path(directory)
    if (directory / "state.json").is_file():
        return directory
    old = directory.parent / f"{TMP_PREFIX}old-{directory.name}"
    if (old / "state.json").is_file():
        return old
    return None


def load_checkpoint(directory: Path) -> Checkpoint:
    """Read a checkpoint written by `save_checkpoint`; StoreFormatError when missing, damaged or too new."""
    found = resolve(directory)
    if found is None:
        raise StoreFormatError(f"{directory}: no checkpoint here (expected state.json and *.safetensors)")
    try:
        doc = json.loads((found / "state.json").read_text())
        model = load_file(str(found / "model.safetensors"))
        opt_all = load_file(str(found / "optimizer.safetensors"))
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        raise StoreFormatError(f"{found}: damaged checkpoint ({e}); delete it to start over") from e
    if int(doc.get("format", 0)) > CHECKPOINT_FORMAT:
        raise StoreFormatError(
            f"{found}: checkpoint format {doc.get('format')} is newer than this amago-pipe supports "
            f"({CHECKPOINT_FORMAT}); upgrade amago-pipe"
        )
    rng_tensors = {k: v for k, v in opt_all.items() if k.startswith("rng.")}
    opt_tensors = {k: v for k, v in opt_all.items() if not k.startswith("rng.")}
    return Checkpoint(
        path=found,
        model=model,
        optimizer=optimizer_from_flat(opt_tensors, doc["optimizer"]),
        scheduler=doc.get("scheduler", {}),
        state=TrainingState.from_json(doc["state"]),
        rng_tensors=rng_tensors,
        rng_meta=doc.get("rng", {}),
        meta=doc.get("meta", {}),
    )


def check_shapes(expected: dict[str, torch.Tensor], found: dict[str, torch.Tensor], *, where: str) -> None:
    """DataError listing missing, unexpected and differently shaped weights (a checkpoint of another model)."""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    wrong = [  # the sequence model's first: the heads' input widths follow from it
        f"{k}: checkpoint {tuple(found[k].shape)}, model {tuple(expected[k].shape)}"
        for k in sorted(set(expected) & set(found), key=lambda k: (not k.startswith("model."), k))
        if tuple(found[k].shape) != tuple(expected[k].shape)
    ]
    if not (missing or extra or wrong):
        return
    parts = []
    if wrong:
        parts.append(f"{len(wrong)} weights differ in shape ({'; '.join(wrong[:3])}{' ...' if len(wrong) > 3 else ''})")
    if missing:
        parts.append(f"{len(missing)} weights missing ({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''})")
    if extra:
        parts.append(f"{len(extra)} unexpected weights ({', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''})")
    raise DataError(
        f"{where}: the checkpoint was written by a model of another shape: {'; '.join(parts)}. "
        "Use the model config it was trained with, or start a fresh run (--force)"
    )


# ---- policy weights ---------------------------------------------------------------------------


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a weights file written by `save_weights` (a policy file); StoreFormatError when unreadable."""
    try:
        return load_file(str(path))
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        raise StoreFormatError(f"{path}: not a readable weights file ({e})") from e


def save_weights(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Write a safetensors file atomically (temp file + rename); OutOfSpaceError as `save_checkpoint`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_debris(path.parent)
    tmp = _tmp_path(path)  # a folder: safetensors writes a temp file of its own beside the file it writes
    with _writing(path, tmp):
        tmp.mkdir()
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp / path.name), metadata=metadata
        )
        os.replace(tmp / path.name, path)
        tmp.rmdir()


def prune(directory: Path, pattern: str, keep: int) -> list[Path]:
    """Delete all but the newest `keep` entries matching `pattern` (sorted by name); return the deleted ones.

    Each is first renamed to a temp name, so a kill mid-delete leaves debris for `clean_debris`, not a
    half-deleted checkpoint.
    """
    entries = sorted(Path(directory).glob(pattern))
    doomed = entries[:-keep] if keep > 0 else entries
    for p in doomed:
        tmp = _tmp_path(p)
        os.replace(p, tmp)
        _remove(tmp)
    return doomed


def _tmp_path(target: Path) -> Path:
    """Where this process writes `target` before renaming it into place (`.tmp-<name>-<pid>`)."""
    return target.parent / f"{TMP_PREFIX}{target.name}-{os.getpid()}"


def _old_path(target: Path) -> Path:
    """Where `replace_dir` keeps the previous `target` until the new one is in place."""
    return target.parent / f"{TMP_PREFIX}old-{target.name}"


@contextlib.contextmanager
def _writing(target: Path, tmp: Path) -> Iterator[None]:
    """Remove `tmp` when the write into it fails; a failure for lack of space becomes OutOfSpaceError."""
    _remove(tmp)
    try:
        yield
    except BaseException as e:
        _remove(tmp)
        if isinstance(e, Exception) and out_of_space(e) is not None:
            kept = "the previous version is kept" if resolve(target) or target.is_file() else ""
            raise out_of_space_error(target, e, kept=kept) from e
        raise


def _remove(path: Path) -> bool:
    """Delete a file or folder if it exists (another process may be deleting it too); True when it was there."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    return True


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
