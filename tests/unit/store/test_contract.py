"""The shipped store contract suite, run over the Zarr store (local directory and fsspec memory://)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amago_pipe.spec import DataSpec
from amago_pipe.store import TrajectoryStore
from amago_pipe.testing.store_contract import StoreContract


class TestZarrStoreLocal(StoreContract):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[[DataSpec], Any]:
        paths = (tmp_path / f"s{i}.zarr" for i in itertools.count())
        return lambda spec: TrajectoryStore.create(next(paths), spec)


class TestZarrStoreMemoryUrl(StoreContract):
    @pytest.fixture
    def store_factory(self) -> Callable[[DataSpec], Any]:
        return lambda spec: TrajectoryStore.create(f"memory://contract-{uuid.uuid4().hex}/store.zarr", spec)
