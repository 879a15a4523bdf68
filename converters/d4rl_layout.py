"""Reading the D4RL HDF5 layout with h5py: opening, checking array lengths/flags, inferring the action space.

Used by `d4rl_hdf5.py`; never imports the old `d4rl` package. numpy + h5py (lazily); no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.errors import DataError, MissingDependencyError
from amago_pipe.spec import ActionSpec
from amago_pipe.store.format import storable_dtype

REQUIRED = ("observations", "actions", "rewards", "terminals")
"""Arrays a D4RL file must have (`timeouts`, `next_observations` and `infos/*` are optional)."""
BLOCK_BYTES = 16 << 20
"""Rows are read in blocks of about this many bytes (bounded memory for any file size)."""


def open_h5(path: Path) -> Any:
    """Open an HDF5 file read-only; DataError that says 'truncated or corrupt' instead of h5py's OSError."""
    try:
        import h5py
    except ImportError as e:
        raise MissingDependencyError(f"D4RL files are read with h5py ({e}); pip install h5py") from e
    if not path.is_file():
        raise DataError(f"path '{path}': no such file; expected a D4RL .hdf5 file")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise DataError(
            f"{path}: cannot be opened as HDF5 ({e}); the file is truncated, corrupt or not HDF5 — "
            f"download or copy it again (compare its size/checksum with the original)"
        ) from e


def read_rows(ds: Any, start: int, stop: int, *, where: str) -> np.ndarray:
    """Rows [start, stop) of an h5py dataset; DataError naming the rows if the file is damaged there."""
    try:
        return np.asarray(ds[start:stop])
    except (OSError, RuntimeError, ValueError) as e:
        raise DataError(
            f"{where}: reading {ds.name} rows {start}:{stop} failed ({e}); the file is truncated or corrupt "
            f"there — download or copy it again"
        ) from e


def check_layout(f: Any, *, where: str, info_keys: list[str]) -> tuple[int, dict[str, str]]:
    """Number of rows N and the dataset names to read; DataError for missing or mismatched arrays."""
    import h5py

    groups = [k for k in REQUIRED if isinstance(f.get(k), h5py.Group)]
    if groups:
        raise DataError(
            f"{where}: {', '.join(groups)} is a group (nested arrays), not one array; the D4RL layout has one "
            f"(N, ...) array per key — this file looks like another format (e.g. robomimic), convert it to D4RL "
            f"layout or Minari first"
        )
    missing = [k for k in REQUIRED if not isinstance(f.get(k), h5py.Dataset)]
    if missing:
        present = sorted(k for k in f)
        raise DataError(
            f"{where}: missing D4RL array(s) {', '.join(missing)} (the file has: {', '.join(present) or 'nothing'}); "
            f"expected the D4RL layout: observations, actions, rewards, terminals [, timeouts, next_observations, infos/*]"
        )
    names = {k: k for k in REQUIRED}
    for optional in ("timeouts", "next_observations"):
        if isinstance(f.get(optional), h5py.Dataset):
            names[optional] = optional
    for key in info_keys:
        full = key if key.startswith("infos/") else f"infos/{key}"
        if not isinstance(f.get(full), h5py.Dataset):
            known = sorted(f"infos/{k}" for k in f["infos"]) if isinstance(f.get("infos"), h5py.Group) else []
            raise DataError(
                f"info_keys: '{key}' is not in {where} (looked for '{full}'; the file has: {', '.join(known) or 'no infos'}); "
                f"remove it from info_keys or pick one of those"
            )
        names[full] = full
    for name in names.values():
        storable_dtype(f[name].dtype, f"{where}: {name}")
    n = int(f["observations"].shape[0]) if f["observations"].ndim else 0
    if n == 0:
        raise DataError(f"{where}: the dataset is empty (observations has 0 rows); expected at least one transition")
    bad = [f"{k} has {f[v].shape[0] if f[v].ndim else 0} rows" for k, v in names.items() if _rows(f[v]) != n]
    if bad:
        raise DataError(
            f"{where}: arrays of mismatched length: observations has {n} rows but "
            + ", ".join(bad)
            + "; every D4RL array must have one row per transition — the file is damaged or not in D4RL layout"
        )
    return n, names


def _rows(ds: Any) -> int:
    return int(ds.shape[0]) if ds.ndim else 0


def read_flags(f: Any, name: str, n: int, *, where: str) -> np.ndarray:
    """A terminals/timeouts array as bool (N,); DataError if it holds values other than 0/1."""
    raw = read_rows(f[name], 0, n, where=where).reshape(n, -1)
    if raw.shape[1] != 1:
        raise DataError(f"{where}: {name} has shape {f[name].shape}, expected ({n},) booleans")
    raw = raw[:, 0]
    if raw.dtype != np.bool_:
        odd = ~np.isin(raw, (0, 1))
        if odd.any():
            rows = np.flatnonzero(odd)[:5].tolist()
            raise DataError(
                f"{where}: {name} holds values other than 0/1 (e.g. rows {rows}: {raw[rows].tolist()}); "
                f"expected boolean flags"
            )
    return raw.astype(bool)


def block_rows(f: Any, names: dict[str, str]) -> int:
    """Rows per read block so one block of every array stays near BLOCK_BYTES."""
    row_bytes = sum(int(np.prod(f[v].shape[1:], dtype=np.int64)) * f[v].dtype.itemsize for v in names.values())
    return int(max(1, BLOCK_BYTES // max(row_bytes, 1)))


def infer_action_spec(f: Any, n: int, *, where: str) -> tuple[ActionSpec, str]:
    """The action space from the data (D4RL files store none) and a sentence saying how it was inferred."""
    ds = f["actions"]
    step = max(1, BLOCK_BYTES // max(int(np.prod(ds.shape[1:], dtype=np.int64)) * ds.dtype.itemsize, 1))
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    for start in range(0, n, step):
        block = read_rows(ds, start, min(start + step, n), where=where).reshape(min(step, n - start), -1)
        if block.dtype.kind == "f":
            block = np.where(np.isfinite(block), block, np.nan)
        lo, hi = np.nanmin(block, axis=0), np.nanmax(block, axis=0)
        low = lo if low is None else np.fmin(low, lo)
        high = hi if high is None else np.fmax(high, hi)
    assert low is not None and high is not None  # n >= 1 was checked by check_layout
    shape = tuple(int(s) for s in ds.shape[1:]) or (1,)
    if ds.dtype.kind in "iub":
        if float(np.min(low)) < 0:
            raise DataError(f"{where}: integer actions include negative values ({int(np.min(low))}); expected ids >= 0")
        if ds.ndim == 1 or shape == (1,):
            n_actions = int(np.max(high)) + 1
            return ActionSpec(
                "discrete", (), n=n_actions
            ), f"integer actions read as discrete({n_actions}) (max id + 1)"
        if float(np.max(high)) <= 1:
            return ActionSpec("multibinary", shape, n=int(np.prod(shape))), "0/1 integer vectors read as multibinary"
        nvec = tuple(int(h) + 1 for h in high.tolist())
        return ActionSpec("multidiscrete", shape, nvec=nvec), f"integer vectors read as multidiscrete{list(nvec)}"
    if float(np.nanmin(low)) >= -1 and float(np.nanmax(high)) <= 1:
        bounds = (np.full(len(low), -1.0), np.full(len(low), 1.0))
        how = "continuous actions all lie in [-1, 1]: bounds set to [-1, 1] (D4RL stores no action space)"
    else:
        bounds = (low.astype(np.float64), high.astype(np.float64))
        how = "continuous action bounds set to the observed per-dimension min/max (D4RL stores no action space)"
    return ActionSpec("continuous", shape, low=tuple(bounds[0].tolist()), high=tuple(bounds[1].tolist())), how


def read_metadata(f: Any) -> dict[str, Any]:
    """Small scalars/strings from file attributes and the `metadata/` group (JSON-able)."""
    import h5py

    out: dict[str, Any] = {f"attrs/{k}": _plain(v) for k, v in f.attrs.items()}
    group = f.get("metadata")
    if isinstance(group, h5py.Group):

        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset) and obj.size <= 64:
                out[f"metadata/{name}"] = _plain(obj[()])

        group.visititems(visit)
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()] if v.dtype.kind in "SO" else v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v if isinstance(v, int | float | str | bool | list) or v is None else str(v)
