"""Finding Minari datasets: the local root (or another one for a while), listing, loading by id or folder
(optionally downloading).

Imports minari only inside functions (with an install hint when missing). No torch, no click.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from amago_pipe.errors import ConfigError, DataError, MissingDependencyError, did_you_mean


def import_minari() -> Any:
    """The `minari` module, or MissingDependencyError with the install hint."""
    try:
        import minari
    except ImportError as e:
        raise MissingDependencyError(
            f"Minari datasets need the `minari` package ({e}); pip install 'minari>=0.5'"
        ) from e
    return minari


def datasets_root() -> Path:
    """The local Minari root: `MINARI_DATASETS_PATH` or `~/.minari/datasets`."""
    root = os.environ.get("MINARI_DATASETS_PATH")
    return Path(root) if root else Path.home() / ".minari" / "datasets"


@contextmanager
def minari_root(root: str | Path | None) -> Iterator[None]:
    """Temporarily point MINARI_DATASETS_PATH at `root` (no-op when None)."""
    if root is None:
        yield
        return
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(Path(root).expanduser().resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def local_datasets() -> dict[str, dict[str, Any]]:
    """Local dataset ids with their metadata (malformed folders are skipped, as Minari does)."""
    minari = import_minari()
    if not datasets_root().is_dir():
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(minari.list_local_datasets())


def load(dataset: str | None, path: str | None, *, download: bool) -> Any:
    """A `MinariDataset` from a local id, a dataset folder, or (with `download`) the remote server."""
    import_minari()
    if path:
        return _load_path(Path(path))
    if not dataset:
        raise ConfigError("dataset: give a Minari dataset id (or `path:` to a dataset folder)", path="dataset")
    return _load_id(dataset, download=download)


def _open(data_path: Path, what: str) -> Any:
    from gymnasium import error as gym_error
    from minari import MinariDataset

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return MinariDataset(data_path)
    except ImportError as e:
        raise MissingDependencyError(
            f"{what}: this Minari dataset's storage format needs an extra package ({e}); "
            f"pip install 'minari[arrow]' for arrow/parquet datasets"
        ) from e
    except gym_error.Error as e:  # old datasets without stored spaces: minari builds the env to get them
        raise DataError(
            f"{what}: its metadata stores no observation/action space, so minari needs the environment to get "
            f"them, and that failed ({type(e).__name__}: {e}); install the environment's package or re-save the "
            f"dataset with a newer minari"
        ) from e
    except (ValueError, KeyError, OSError, TypeError) as e:
        raise DataError(
            f"{what}: not a readable Minari dataset ({type(e).__name__}: {e}); expected a folder with "
            f"metadata.json and the episode data written by minari >= 0.4"
        ) from e


def _load_path(path: Path) -> Any:
    if not path.exists():
        raise DataError(f"path '{path}': no such Minari dataset folder; check the path")
    data_path = path / "data" if (path / "data" / "metadata.json").exists() else path
    if not (data_path / "metadata.json").exists():
        raise DataError(
            f"path '{path}': no metadata.json found (looked in {path} and {path / 'data'}); "
            f"expected a Minari dataset folder (the one containing data/)"
        )
    return _open(data_path, f"minari dataset folder '{path}'")


def _load_id(dataset_id: str, *, download: bool) -> Any:
    root = datasets_root()
    data_path = root / dataset_id / "data"
    if not data_path.exists():
        if not download:
            raise DataError(unknown_dataset_message(dataset_id))
        _download(dataset_id)
    return _open(data_path, f"minari dataset '{dataset_id}'")


def _download(dataset_id: str) -> None:
    minari = import_minari()
    try:
        minari.download_dataset(dataset_id)
    except ImportError as e:
        raise MissingDependencyError(
            f"downloading Minari dataset '{dataset_id}' needs minari's remote extras ({e}); pip install 'minari[gcs,hf]'"
        ) from e
    except Exception as e:  # network, auth and "unknown remote id" errors all land here
        raise DataError(
            f"could not download Minari dataset '{dataset_id}' ({type(e).__name__}: {e}); check the id "
            f"(`minari list remote`) and the network, or copy the dataset into {datasets_root()}"
        ) from e


def unknown_dataset_message(dataset_id: str) -> str:
    """`dataset: unknown Minari dataset 'x' in ROOT (local: ...); did you mean 'y'? ...`."""
    root = datasets_root()
    ids = sorted(local_datasets())
    shown = ", ".join(ids[:20]) + (f", ... ({len(ids)} in all)" if len(ids) > 20 else "") if ids else "none"
    return (
        f"dataset: unknown Minari dataset '{dataset_id}' in {root} (local datasets: {shown})"
        f"{did_you_mean(dataset_id, ids)}; set MINARI_DATASETS_PATH to another root, give `path:` to a dataset "
        f"folder, or set `download: true` (CLI: --download) to fetch it"
    )
