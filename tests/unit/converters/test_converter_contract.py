"""The contract every registered converter honours, run over the same episodes written in each source layout.

Counts, boundaries, terminal vs timeout, dtypes, first/last observations, accounting and idempotence.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from converter_helpers import run, stored
from gymnasium import spaces

from amago_pipe.config.registries import CONVERTERS
from amago_pipe.testing import synthetic as syn

LAYOUT = [(6, "terminal"), (4, "timeout"), (1, "terminal"), (5, "both"), (3, "none")]
OBS_DIM, ACT_DIM = 3, 2


def truth() -> list[syn.TrueEpisode]:
    rng = np.random.default_rng(7)
    return [syn.continuous_episode(rng, n, end, OBS_DIM, ACT_DIM) for n, end in LAYOUT]


def write_d4rl(tmp_path: Path, eps: list[syn.TrueEpisode]) -> dict[str, Any]:
    return {"path": str(syn.write_d4rl_hdf5(tmp_path / "d.hdf5", eps))}


def write_minari(tmp_path: Path, eps: list[syn.TrueEpisode]) -> dict[str, Any]:
    from minari.data_collector import EpisodeBuffer

    buffers = [
        EpisodeBuffer(
            observations=e.obs["observation"],
            actions=e.actions,
            rewards=e.rewards,
            terminations=e.terminated,
            truncations=e.truncated,
        )
        for e in eps
    ]
    box = spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    syn.write_minari("contract/data-v0", buffers, box, spaces.Box(-1, 1, (ACT_DIM,), np.float32))
    return {"dataset": "contract/data-v0"}


def write_amago(tmp_path: Path, eps: list[syn.TrueEpisode]) -> dict[str, Any]:
    for i, e in enumerate(eps):
        syn.write_amago_npz(tmp_path / "amago/buffer/protected", e, unix_time=1000 + i)
    return {"path": str(tmp_path / "amago")}


WRITERS: dict[str, Callable[[Path, list[syn.TrueEpisode]], dict[str, Any]]] = {
    "d4rl": write_d4rl,
    "minari": write_minari,
    "amago-buffer": write_amago,
}
RECORDS_TIMEOUTS = {"d4rl": True, "minari": True, "amago-buffer": False}
"""AMAGO saves terminals only: its time-limit endings come back unfinished (no flag), as the report says."""


def test_every_registered_converter_is_covered():
    assert set(CONVERTERS.names()) == set(WRITERS)


@pytest.fixture(params=sorted(WRITERS))
def converted(request, tmp_path: Path) -> tuple[str, Any, list[Any], list[syn.TrueEpisode]]:
    name = request.param
    eps = truth()
    source = WRITERS[name](tmp_path, eps)
    report = run(tmp_path / "s.zarr", source=name, **source)
    return name, report, stored(tmp_path / "s.zarr"), eps


def test_counts_and_accounting(converted):
    _, report, got, eps = converted
    assert [g.length for g in got] == [e.length for e in eps]
    assert report.episodes == len(eps) and report.timesteps == sum(e.length for e in eps)
    acc = report.accounting()
    assert acc["balanced"] and acc["source_timesteps"] == report.timesteps and acc["dropped"] == 0


def test_terminal_vs_timeout_boundaries(converted):
    name, report, got, eps = converted
    for g, e in zip(got, eps, strict=True):
        np.testing.assert_array_equal(g.terminated, e.terminated)
        expected_trunc = e.truncated if RECORDS_TIMEOUTS[name] else np.zeros_like(e.truncated)
        np.testing.assert_array_equal(g.truncated, expected_trunc)
    assert report.terminated == 3
    assert report.truncated == (1 if RECORDS_TIMEOUTS[name] else 0)


def test_dtypes_and_first_last_observations(converted):
    _, _, got, eps = converted
    for g, e in zip(got, eps, strict=True):
        obs = g.obs["observation"]
        assert obs.dtype == np.float32 and g.actions.dtype == np.float32 and g.rewards.dtype == np.float32
        assert g.terminated.dtype == bool and g.truncated.dtype == bool
        np.testing.assert_array_equal(obs[0], e.obs["observation"][0])
        np.testing.assert_array_equal(obs[-1], e.obs["observation"][-1])
        np.testing.assert_array_equal(g.actions, e.actions)
        np.testing.assert_allclose(g.rewards, e.rewards)


def test_idempotent(converted, tmp_path: Path):
    name, report, _, _ = converted
    source = (
        {"path": str(tmp_path / "d.hdf5")}
        if name == "d4rl"
        else ({"dataset": "contract/data-v0"} if name == "minari" else {"path": str(tmp_path / "amago")})
    )
    again = run(tmp_path / "s.zarr", source=name, **source)
    assert again.status == "skipped" and again.source_fingerprint == report.source_fingerprint
    assert len(stored(tmp_path / "s.zarr")) == len(LAYOUT)
