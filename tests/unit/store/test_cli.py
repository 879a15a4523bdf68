"""`amago-pipe store inspect | verify | evict | copy` on real stores, errors mapped to exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from amago_pipe.cli.common import AmagoGroup
from amago_pipe.cli.store_cmds import COMMANDS
from amago_pipe.store import TrajectoryStore
from amago_pipe.testing.episodes import example_specs, random_episode

BOX = example_specs()["box"]


@click.group(cls=AmagoGroup)
def cli() -> None:
    """Stand-in for the main group (which maps errors to exit codes the same way)."""


for _command in COMMANDS:
    cli.add_command(_command)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    rng = np.random.default_rng(0)
    for partition, count in (("protected", 2), ("fifo", 4)):
        for _ in range(count):
            with store.writer(partition) as w:
                w.add(random_episode(BOX, 10, rng))
    return str(tmp_path / "s.zarr")


def test_inspect_json_is_machine_readable(store_path: str) -> None:
    code, out, _ = _run("store", "inspect", store_path, "--json")
    data = json.loads(out)
    assert code == 0 and data["format_version"] == 1 and data["spec"] == BOX.to_json()
    fifo = data["partitions"]["fifo"]
    assert (fifo["kind"], fifo["segments"], fifo["episodes"], fifo["timesteps"]) == ("fifo", 4, 4, 40)
    assert sum(fifo["return_histogram"]["counts"]) == 4 and len(fifo["return_histogram"]["edges"]) == 11
    assert data["total"]["timesteps"] == 60


def test_inspect_text_shows_partitions_histogram_and_spec(store_path: str) -> None:
    code, out, _ = _run("store", "inspect", store_path)
    assert code == 0
    assert "protected  protected" in out and "fifo       fifo" in out and "returns of fifo: 4 episodes, min" in out
    assert "█" in out and "obs   observation" in out and "action continuous shape=(2,)" in out


def test_verify_ok_then_damaged_then_quarantined(store_path: str) -> None:
    code, out, _ = _run("store", "verify", store_path)
    assert code == 0 and "checked 6 sealed segments: 6 episodes, 60 timesteps" in out and out.strip().endswith("ok")
    sid = TrajectoryStore.open(store_path).segments("fifo")[0].id
    (Path(store_path) / "partitions" / "fifo" / "segments" / sid / "rewards" / "c.0").write_bytes(b"junk")
    code, out, err = _run("store", "verify", store_path)
    assert code == 3 and f"damaged     fifo/{sid}: array 'rewards' fails to decode" in out
    assert "error:" in err and "1 damaged segment(s)" in err and "--quarantine" in err
    code, out, _ = _run("store", "verify", store_path, "--quarantine", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["findings"][0]["action"] == "quarantined"


def test_evict_and_protected_refusal(store_path: str) -> None:
    code, out, _ = _run("store", "evict", store_path, "--partition", "fifo", "--max-timesteps", "25")
    assert code == 0 and "evicted 20 timesteps (2 segments) from 'fifo'; 20 timesteps in 2 segments remain" in out
    code, _, err = _run("store", "evict", store_path, "--partition", "protected", "--max-timesteps", "0")
    assert code == 3 and "partition 'protected' is protected and never evicted" in err


def test_copy_selected_partitions_and_again_is_a_no_op(store_path: str, tmp_path: Path) -> None:
    dst = str(tmp_path / "copy.zarr")
    code, out, _ = _run("store", "copy", store_path, dst, "--partition", "fifo")
    assert code == 0 and "fifo: copied 4 segments, skipped 0" in out
    copied = TrajectoryStore.open(dst)
    assert copied.partitions() == ["fifo"] and copied.fingerprint("fifo") == TrajectoryStore.open(
        store_path
    ).fingerprint("fifo")
    code, out, _ = _run("store", "copy", store_path, dst)
    assert code == 0 and "fifo: copied 0 segments, skipped 4" in out and "protected: copied 2 segments" in out
    originals = list(TrajectoryStore.open(store_path).iter_episodes("protected"))
    for a, b in zip(originals, TrajectoryStore.open(dst).iter_episodes("protected"), strict=True):
        assert np.array_equal(a.obs["observation"], b.obs["observation"]) and np.array_equal(a.actions, b.actions)


def test_missing_store_and_unknown_partition_errors(tmp_path: Path, store_path: str) -> None:
    code, _, err = _run("store", "inspect", str(tmp_path / "nope.zarr"))
    assert code == 3 and "no trajectory store here" in err
    code, _, err = _run("store", "copy", store_path, str(tmp_path / "d.zarr"), "--partition", "fif")
    assert code == 3 and "copy: no partition 'fif'" in err
