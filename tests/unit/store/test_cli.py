"""`amago-pipe store inspect | verify | evict | copy` on real stores, errors mapped to exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from amago_pipe.cli.common import AmagoGroup
from amago_pipe.cli.store_cmds import COMMANDS
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.segments import SegmentBuilder
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


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    rng = np.random.default_rng(0)
    for partition, count in (("protected", 2), ("fifo", 4)):
        for i in range(count):
            with store.writer(
                partition
            ) as w:  # ends alternate terminated, truncated; fifo: lengths 10, 10, 8, 12, last open
                ep = random_episode(
                    BOX, 10 if partition == "protected" else (10, 10, 8, 12)[i], rng, terminated=i % 2 == 0
                )
                if partition == "fifo" and i == 3:
                    ep.truncated[-1] = False
                w.add(ep)
    return str(tmp_path / "s.zarr")


def test_inspect_json_is_machine_readable(store_path: str) -> None:
    code, out, _ = _run("store", "inspect", store_path, "--json")
    data = json.loads(out)
    assert code == 0 and data["format_version"] == 1 and data["spec"] == BOX.to_json()
    fifo = data["partitions"]["fifo"]
    assert (fifo["kind"], fifo["segments"], fifo["episodes"], fifo["timesteps"]) == ("fifo", 4, 4, 40)
    assert (fifo["length_min"], fifo["length_mean"], fifo["length_max"]) == (8, 10.0, 12)
    assert fifo["ends"] == {"terminated": 2, "truncated": 1, "open": 1}
    assert data["partitions"]["protected"]["ends"] == {"terminated": 1, "truncated": 1, "open": 0}
    assert sum(fifo["return_histogram"]["counts"]) == 4 and len(fifo["return_histogram"]["edges"]) == 11
    assert data["total"]["timesteps"] == 60


def test_inspect_text_shows_partitions_histogram_and_spec(store_path: str) -> None:
    code, out, _ = _run("store", "inspect", store_path)
    assert code == 0
    assert "protected  protected" in out and "fifo       fifo" in out and "returns of fifo: 4 episodes, min" in out
    assert "steps per episode 8 to 12 (mean 10.0); ends: 2 terminated, 1 truncated (time limit), 1 open" in out
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
    assert code == 0
    assert "evicted 20 timesteps (2 episodes) from 'fifo'; 20 timesteps in 2 episodes (2 segments) remain" in out
    code, _, err = _run("store", "evict", store_path, "--partition", "protected", "--max-timesteps", "0")
    assert code == 3 and "partition 'protected' is protected and never evicted" in err
    assert "`amago-pipe store copy SRC DST --partition NAME`" in err and "drop_segments" not in err


def test_evict_keeps_whole_episodes_of_one_large_segment(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    rng = np.random.default_rng(0)
    with store.writer("fifo", atomic=True) as w:  # one segment, as the collect stage writes
        for _ in range(60):
            w.add(random_episode(BOX, 100, rng))
    code, out, _ = _run("store", "evict", str(tmp_path / "s.zarr"), "--partition", "fifo", "--max-timesteps", "1000")
    assert code == 0 and "evicted 5000 timesteps (50 episodes) from 'fifo'; 1000 timesteps in 10 episodes" in out
    code, out, _ = _run("store", "evict", "--help")
    assert code == 0 and "Granularity is the episode" in out


def test_inspect_reports_damage_and_abandoned_segments(store_path: str) -> None:
    store = TrajectoryStore.open(store_path)
    sid = store.segments("fifo")[0].id
    (Path(store_path) / "partitions" / "fifo" / "segments" / sid / "rewards" / "c.0").unlink()
    abandoned = SegmentBuilder(store.files, "fifo")
    meta = Path(store_path) / "partitions" / "fifo" / "segments" / abandoned.id / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["writer"]["pid"] = _dead_pid()
    meta.write_text(json.dumps(doc))
    code, out, err = _run("store", "inspect", store_path)
    assert code == 3 and f"damaged     fifo/{sid}: array 'rewards' has 0 of 1 chunks" in out
    assert f"abandoned   fifo/{abandoned.id}: unsealed; writer pid" in out and "the next write to the partition" in out
    assert err.count("\n") == 1 and f"run `amago-pipe store verify {store_path} --quarantine`" in err
    code, out, _ = _run("store", "inspect", store_path, "--json")
    assert code == 3 and {f["status"] for f in json.loads(out)["findings"]} == {"damaged", "abandoned"}
    _run("store", "verify", store_path, "--quarantine")
    code, out, _ = _run("store", "inspect", store_path)
    assert code == 0 and "damaged" not in out and "abandoned" not in out


def test_inspect_a_store_without_its_spec_attribute(store_path: str) -> None:
    root = Path(store_path) / "zarr.json"
    doc = json.loads(root.read_text())
    del doc["attributes"]["amago_pipe_store"]["spec"]
    root.write_text(json.dumps(doc))
    code, _, err = _run("store", "inspect", store_path)
    assert code == 3 and err.startswith("error: ") and err.count("\n") == 1 and "has no data spec" in err


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
