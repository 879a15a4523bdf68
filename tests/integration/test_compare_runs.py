"""Two tiny online runs (GRU, and `ff` with another seed): each evaluate stage writes record.json, and
`amago-pipe compare` shows the config keys that differ, final and best metrics, and overlays the curves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_support import cli_env, toy_online_pipeline

ENV = '{factory: "amago_pipe.envs.toy:make_toy_env", kwargs: {min_len: 4, max_len: 9}, n_envs: 2}'
FF = "stages.train.model.traj_encoder={type: ff, d_model: 16}"


def amago(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True
    )


def make_runs(root: Path) -> None:
    """The two runs, side by side (two processes): a GRU, and `ff` with seed 1, each with its own store."""
    extra = f"    validate: {{env: {ENV}, episodes: 2, every: 1}}\n"
    text = toy_online_pipeline(name="cmp", own=40, epochs=2, updates=3, extra=extra)
    text += f"  evaluate:\n    type: evaluate\n    env: {ENV}\n    episodes: 4\n    plots: false\n"
    (root / "p.yaml").write_text(text)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "amago_pipe.cli", "run", "p.yaml", *args],
            cwd=root,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for args in (
            ["--run-dir", "runs/gru", "--set", "store=runs/gru/store.zarr"],
            ["--run-dir", "runs/ff", "--set", "store=runs/ff/store.zarr", "--set", FF, "--set", "seed=1"],
        )
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out


def test_records_then_compare_of_two_runs(tmp_path: Path) -> None:
    make_runs(tmp_path)
    gru = json.loads((tmp_path / "runs/gru/stages/evaluate/record.json").read_text())
    ff = json.loads((tmp_path / "runs/ff/stages/evaluate/record.json").read_text())
    assert gru["version"] == 1 and gru["kind"] == "result"
    assert gru["encoder"] == {"tstep": "ff", "traj": "gru"} and ff["encoder"]["traj"] == "ff"
    assert (gru["seed"], ff["seed"]) == (0, 1)
    assert gru["updates"] == 6 and gru["env_steps"] == 80
    assert gru["agent"]["recipe"] == "default" and gru["agent"]["changed"]["critic.num_critics"] == 2
    assert set(gru["metrics"]) >= {"return_mean", "success_rate", "episodes"}
    assert gru["run"]["checkpoint"] == "latest" and gru["run"]["epoch"] == 2
    assert ff["command"] == (
        f"amago-pipe run p.yaml --run-dir runs/ff --set store=runs/ff/store.zarr --set '{FF}' --set seed=1"
    )
    assert gru.get("git_commit") is None or len(gru["git_commit"]) >= 40

    proc = amago(tmp_path, "compare", "runs/*", "--plot", "curves.png")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    row = next(line for line in out.splitlines() if "stages.train.model.traj_encoder.type" in line)
    assert row.split()[1:] == ["ff", "gru"]  # in the glob's order: ff, gru
    assert "stages.train.batch_size" not in out  # the same in both
    for key in ("evaluate: return_mean", "train: val/return_mean best", "train: online/return_mean final"):
        assert key in out, out
    assert (tmp_path / "curves.png").stat().st_size > 5000


def test_compare_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "runs/a").mkdir(parents=True)
    (tmp_path / "runs/a/pipeline.lock.json").write_text('{"format": 1, "stages": {}}')
    (tmp_path / "notes").mkdir()
    proc = amago(tmp_path, "compare", "runs/a", "notes")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: notes: not a run directory (no pipeline.lock.json); give folders made by `amago-pipe run`, "
        "e.g. runs/<pipeline name>"
    ]
    missing = amago(tmp_path, "compare", "runs/none-*")
    assert missing.returncode == 2 and "runs/none-*: no folder matches" in missing.stderr
    empty = amago(tmp_path, "compare", "runs/a")
    assert empty.returncode == 0 and "metrics: none recorded" in empty.stdout
