"""Fixtures for the network tests: small data specs and a seeded torch generator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec


@pytest.fixture(autouse=True)
def _seed_torch_and_one_thread() -> Iterator[None]:
    """Seeded, single-threaded torch: these tensors are tiny, and OpenMP waits cost most on a shared CPU."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def vector_spec() -> DataSpec:
    """A vector observation, a small integer observation and a discrete action."""
    return DataSpec(
        observations={
            "observation": ArraySpec((4,), "float32"),
            "mode": ArraySpec((), "int64", 0.0, 3.0),
        },
        action=ActionSpec("discrete", (), n=3),
    )


@pytest.fixture
def multimodal_spec() -> DataSpec:
    """Two images (channels-first and -last, uint8), a vector, an integer key, a continuous action."""
    return DataSpec(
        observations={
            "camera": ArraySpec((3, 40, 40), "uint8", 0.0, 255.0),
            "wrist/pixels": ArraySpec((12, 12, 3), "uint8", 0.0, 255.0),
            "joints": ArraySpec((5,), "float32"),
            "mode": ArraySpec((), "int64", 0.0, 3.0),
        },
        action=ActionSpec("continuous", (2,), low=(-1.0, -1.0), high=(1.0, 1.0)),
    )
