"""Filesystem operations zarr does not offer synchronously: list, atomic small writes, delete, move, size.

`LocalBackend` (a directory, the default) and `FsspecBackend` (any other URL fsspec knows) share one
interface; both also hand zarr the matching store object. A remote store's failures (a missing package, an
endpoint down, no bucket, no credentials) become one-line errors naming the URL. numpy-free; no torch or click.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from amago_pipe.errors import AmagoPipeError, MissingDependencyError, StoreFormatError


class LocalBackend:
    """A store in a local directory. Small files are written to a temporary name and renamed into place."""

    def __init__(self, root: Path):
        self.root = root
        self.url = str(root)
        self._zarr_store: Any = None

    def zarr_store(self) -> Any:
        if self._zarr_store is None:
            from zarr.storage import LocalStore

            self._zarr_store = LocalStore(self.root)
        return self._zarr_store

    def _path(self, key: str) -> Path:
        return self.root / key if key else self.root

    def exists(self, key: str = "") -> bool:
        return self._path(key).exists()

    def read_bytes(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def write_atomic(self, key: str, data: bytes, *, exclusive: bool = False) -> bool:
        """Write a whole file so that readers see either nothing or all of it. exclusive=True: only when the
        file does not exist yet (of writers racing, exactly one gets True)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".tmp-{uuid.uuid4().hex}-{path.name}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            if not exclusive:
                os.replace(tmp, path)
                return True
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError:  # no hard links on this filesystem: check, then rename (best effort)
                if path.exists():
                    return False
                os.replace(tmp, path)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def list_dir(self, key: str) -> list[str]:
        """Names of the direct children of `key` (empty when it does not exist)."""
        try:
            return sorted(os.listdir(self._path(key)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def is_dir(self, key: str) -> bool:
        return self._path(key).is_dir()

    def is_file(self, key: str) -> bool:
        return self._path(key).is_file()

    def files(self, key: str = "") -> list[str]:
        """Keys of every file below `key`, relative to the store root."""
        out: list[str] = []
        for dirpath, _, names in os.walk(self._path(key)):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            out.extend(name if rel == "." else f"{rel}/{name}" for name in names)
        return sorted(out)

    def delete(self, key: str) -> bool:
        """Remove a file or a whole tree; missing is fine (another process may have removed it). True when this
        call removed the file (of processes racing to remove one file, exactly one gets True)."""
        path = self._path(key)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            return True
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    def prune_dirs(self) -> None:
        """Remove empty directories, the root included (directories holding anything are left alone)."""
        for dirpath, _, _ in sorted(os.walk(self.root), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)

    def move(self, src: str, dst: str) -> None:
        target = self._path(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self._path(src), target)

    def size(self, key: str) -> int:
        """Bytes on disk under `key` (files only)."""
        path = self._path(key)
        if path.is_file():
            return path.stat().st_size
        total = 0
        for dirpath, _, files in os.walk(path):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    total += os.path.getsize(os.path.join(dirpath, name))
        return total

    def mtime(self, key: str) -> float | None:
        try:
            return self._path(key).stat().st_mtime
        except FileNotFoundError:
            return None


class FsspecBackend:
    """A store at an fsspec URL (`memory://`, `s3://`, ...). Object stores make each whole-file put atomic."""

    def __init__(self, url: str):
        import fsspec

        self.url = url.rstrip("/")
        try:
            self.fs, path = fsspec.core.url_to_fs(self.url)
        except ImportError as e:
            raise missing_package_error(self.url, e) from e
        except ValueError as e:  # an unknown protocol, a malformed URL
            raise StoreFormatError(f"{self.url}: cannot open a store at this URL ({e}); fix `store:`") from e
        self.root = path.rstrip("/")
        self._zarr_store: Any = None

    @contextlib.contextmanager
    def _remote(self, action: str) -> Iterator[None]:
        """Turn a failure of the remote filesystem while `action` ("reading zarr.json") into one error naming the URL."""
        try:
            yield
        except AmagoPipeError:
            raise
        except Exception as e:
            if not is_remote_failure(e):
                raise
            raise remote_error(self.url, action, e) from e

    def zarr_store(self) -> Any:
        if self._zarr_store is None:
            from zarr.storage import FsspecStore

            self._zarr_store = FsspecStore.from_url(self.url)
        return self._zarr_store

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def exists(self, key: str = "") -> bool:
        with self._remote(f"looking for {key or 'the store'}"):
            return bool(self.fs.exists(self._path(key)))

    def read_bytes(self, key: str) -> bytes | None:
        with self._remote(f"reading {key}"):
            try:
                data: bytes = self.fs.cat_file(self._path(key))
                return data
            except (FileNotFoundError, IsADirectoryError):
                return None

    def write_atomic(self, key: str, data: bytes, *, exclusive: bool = False) -> bool:
        """Object stores make each put atomic; `exclusive` is best effort here (check, then put)."""
        if exclusive and self.exists(key):
            return False
        with self._remote(f"writing {key}"):
            self.fs.pipe_file(self._path(key), data)
        return True

    def list_dir(self, key: str) -> list[str]:
        with self._remote(f"listing {key or 'the store'}"):
            try:
                entries = self.fs.ls(self._path(key), detail=False)
            except FileNotFoundError:
                return []
        return sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def is_dir(self, key: str) -> bool:
        with self._remote(f"looking for {key or 'the store'}"):
            return bool(self.fs.isdir(self._path(key)))

    def is_file(self, key: str) -> bool:
        with self._remote(f"looking for {key or 'the store'}"):
            return bool(self.fs.isfile(self._path(key)))

    def files(self, key: str = "") -> list[str]:
        with self._remote(f"listing {key or 'the store'}"):
            try:
                found = self.fs.find(self._path(key))
            except FileNotFoundError:
                return []
        return sorted(str(p)[len(self.root) + 1 :] for p in found)

    def delete(self, key: str) -> bool:
        """Remove a file or a tree; True when it existed (best effort: object stores have no exclusive delete)."""
        with self._remote(f"deleting {key}"):
            try:
                self.fs.rm(self._path(key), recursive=True)
            except FileNotFoundError:
                return False
        return True

    def prune_dirs(self) -> None:
        """Object stores have no empty directories to remove."""

    def move(self, src: str, dst: str) -> None:
        with self._remote(f"moving {src} to {dst}"):
            self.fs.mv(self._path(src), self._path(dst), recursive=True)

    def size(self, key: str) -> int:
        with self._remote(f"measuring {key or 'the store'}"):
            try:
                return int(self.fs.du(self._path(key), total=True))
            except FileNotFoundError:
                return 0

    def mtime(self, key: str) -> float | None:
        return None


Backend = LocalBackend | FsspecBackend


def backend_for(url: str | Path) -> Backend:
    """A local directory for paths and `file://` URLs, fsspec for every other URL."""
    text = str(url)
    if isinstance(url, Path) or "://" not in text:
        return LocalBackend(Path(text).expanduser().absolute())
    if text.startswith("file://"):
        return LocalBackend(Path(text[len("file://") :]).expanduser().absolute())
    return FsspecBackend(text)


def missing_package_error(url: str, e: ImportError) -> MissingDependencyError:
    """The error for a URL whose fsspec filesystem cannot be imported, with the `pip install` of its package."""
    from fsspec.registry import known_implementations

    protocol = url.split("://", 1)[0]
    package = str(known_implementations.get(protocol, {}).get("class", "")).split(".", 1)[0]
    cause = e.__cause__ or e
    if not package or package == "fsspec":  # a built-in filesystem missing a dependency: fsspec's message names it
        return MissingDependencyError(f"{url}: {protocol}:// stores need more packages ({cause}): {e}")
    return MissingDependencyError(
        f"{url}: {protocol}:// stores need the optional package '{package}', which cannot be imported "
        f"({cause}); install it with: pip install {package}"
    )


def _raised_by(e: BaseException, module: str, *names: str) -> bool:
    """True when `e` is one of the exception classes `names` of `module`, if that module is loaded at all."""
    loaded = sys.modules.get(module)
    classes = tuple(c for c in (getattr(loaded, n, None) for n in names) if isinstance(c, type))
    return bool(classes) and isinstance(e, classes)


def is_remote_failure(e: BaseException) -> bool:
    """An OS-level error or one of the client libraries fsspec filesystems use (botocore, aiohttp)."""
    return (
        isinstance(e, OSError)
        or _raised_by(e, "botocore.exceptions", "BotoCoreError", "ClientError")
        or _raised_by(e, "aiohttp", "ClientError")
    )


def remote_error(url: str, action: str, e: BaseException) -> StoreFormatError:
    """One line for a remote store's failure while `action`: where, what happened, and what to check."""
    detail = " ".join(str(e).split()) or type(e).__name__
    if _raised_by(e, "botocore.exceptions", "NoCredentialsError", "PartialCredentialsError"):
        fix = (
            "set credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), or anon for a public bucket"
        )
        return StoreFormatError(f"{url}: no credentials for this store while {action} ({detail}); {fix}")
    connection = isinstance(e, ConnectionError | TimeoutError) or _raised_by(
        e, "botocore.exceptions", "ConnectionError", "ReadTimeoutError"
    )
    if connection or _raised_by(e, "aiohttp", "ClientConnectionError"):
        return StoreFormatError(
            f"{url}: cannot reach the store while {action} ({detail}); check that its endpoint is up and its address "
            "(fsspec's endpoint_url, e.g. FSSPEC_S3_ENDPOINT_URL, or AWS_ENDPOINT_URL) and the network"
        )
    if isinstance(e, PermissionError):
        return StoreFormatError(
            f"{url}: access denied while {action} ({detail}); check the credentials and permissions"
        )
    if isinstance(e, FileNotFoundError):
        return StoreFormatError(f"{url}: {detail} (while {action}); create the bucket first, or fix the store URL")
    return StoreFormatError(f"{url}: the store failed while {action}: {detail}")
