"""collect under hostile use, with real processes and files: failures that must leave nothing behind, a SIGKILL
inside the Minari write, two pipelines writing one Minari dataset at once, and collect stages sharing a partition."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli_env

from amago_pipe.store import TrajectoryStore


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_refused_policy_creates_no_store(tmp_path: Path, amago: Any) -> None:
    proc = amago("collect", "Pendulum-v1", "--policy", "cartpole-pd", "--episodes", "2", "--store", "s.zarr")
    assert proc.returncode == 3
    assert "builtin policy 'cartpole-pd' needs observation (4,)" in one_line_error(proc)
    assert not (tmp_path / "s.zarr").exists()
    proc = amago("collect", "CartPole-v1", "--exploration", "egreedy:1.5", "--episodes", "2", "--store", "s.zarr")
    assert proc.returncode == 2
    assert (
        "policies.0.policy.exploration.epsilon: an epsilon (a probability) must be in [0, 1], got 1.5"
        in one_line_error(proc)
    )
    assert not (tmp_path / "s.zarr").exists()
    amago("collect", "Pendulum-v1", "--episodes", "2", "--n-envs", "2", "--store", "s.zarr", check=True)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "s.zarr").rglob("*"))
    proc = amago("collect", "Pendulum-v1", "--policy", "cartpole-pd", "--episodes", "2", "--store", "s.zarr")
    assert proc.returncode == 3
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "s.zarr").rglob("*")) == before


def crash_after(obs: dict[str, Any], rng: Any) -> int:
    """A scripted controller that fails a few steps in (after the store was opened)."""
    if rng.random() < 0.2:
        raise RuntimeError("controller bug")
    return 0


def test_a_policy_failing_mid_collect_removes_the_store_it_created(tmp_path: Path) -> None:
    from amago_pipe.cli.collect_cmds import build_config
    from amago_pipe.envs.collect import run_collect

    cfg = build_config({
        "env": {"id": "CartPole-v1", "n_envs": 2},
        "policies": [{"policy": {"type": "scripted", "function": f"{__name__}:crash_after"}, "episodes": 4}],
    })  # fmt: skip
    with pytest.raises(RuntimeError, match="controller bug"):
        run_collect(cfg, store_url=str(tmp_path / "s.zarr"), seed=0)
    assert not (tmp_path / "s.zarr").exists()


def find_data_dir(root: Path) -> bool:
    """True once any (possibly hidden) folder below `root` holds a Minari `data` folder."""
    return any("data" in dirs for _, dirs, _ in os.walk(root))


def test_a_collect_killed_inside_the_minari_write_is_replaced_by_a_rerun(tmp_path: Path) -> None:
    root = tmp_path / "minari"
    env = {**cli_env(), "MINARI_DATASETS_PATH": str(root)}
    args = [sys.executable, "-m", "amago_pipe.cli", "collect", "CartPole-v1", "--episodes", "300"]
    args += ["--minari-id", "cp/killed-v0"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not find_data_dir(root) and proc.poll() is None and time.monotonic() < deadline:
        pass
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # killed while writing, not after
    rerun = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    import minari

    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        assert minari.load_dataset("cp/killed-v0").total_episodes == 300
        assert list(minari.list_local_datasets()) == ["cp/killed-v0"]
    finally:
        del os.environ["MINARI_DATASETS_PATH"]
    leftovers = [p for p in root.rglob("*") if "staging" in p.parts or "old" in p.parts]
    assert [p for p in leftovers if p.is_file()] == []


PIPELINE = """
version: 1
name: {name}
store: store-{name}.zarr
stages:
  data:
    type: collect
    env: {{id: CartPole-v1, n_envs: 4}}
    policies: [{{policy: {{type: random}}, episodes: {episodes}}}]
    output: minari
    dataset_id: shared/race-v0
"""


@pytest.mark.slow
def test_two_pipelines_collecting_one_minari_dataset_at_once(tmp_path: Path) -> None:
    env = {**cli_env(), "MINARI_DATASETS_PATH": str(tmp_path / "minari")}
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(PIPELINE.format(name=name, episodes=1500))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "amago_pipe.cli", "run", f"{name}.yaml"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes[0] == 0, results
    for code, out, err in results:
        assert "Traceback" not in out + err and "FileNotFoundError" not in out + err, (out, err)
        if code != 0:
            assert "'shared/race-v0' is being written by another amago-pipe collect" in out + err, (out, err)
    os.environ["MINARI_DATASETS_PATH"] = str(tmp_path / "minari")
    try:
        import minari

        assert minari.load_dataset("shared/race-v0").total_episodes == 1500
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


SHARED = """
version: 1
name: shared
store: store.zarr
stages:
  random:
    type: collect
    env: {id: CartPole-v1, n_envs: 2}
    policies: [{policy: {type: random}, episodes: 3}]
  expert:
    type: collect
    needs: []
    env: {id: CartPole-v1, n_envs: 2}
    policies: [{policy: {type: cartpole-pd}, episodes: 2}]
"""


def test_collect_stages_sharing_a_partition_skip_when_unchanged(tmp_path: Path, amago: Any) -> None:
    (tmp_path / "p.yaml").write_text(SHARED)
    amago("run", "p.yaml", check=True)
    second = amago("run", "p.yaml", check=True)
    assert second.stdout.count("unchanged") == 2, second.stdout
    assert TrajectoryStore.open(tmp_path / "store.zarr").partition_info("protected").episodes == 5


@pytest.mark.skipif(
    importlib.util.find_spec("gymnax") is None, reason='gymnax is an optional extra: pip install -e ".[gymnax]"'
)
def test_collect_of_a_gymnax_env_steps_it_as_one_batch(tmp_path: Path, amago: Any) -> None:
    proc = amago("collect", "gymnax/CartPole-v1", "--episodes", "3", "--n-envs", "2", "--store", "s.zarr")
    assert proc.returncode == 0 and proc.stdout.startswith("collected 3 episodes"), proc.stdout + proc.stderr
    assert TrajectoryStore.open(tmp_path / "s.zarr").partition_info("protected").episodes == 3
    proc = amago(
        "collect", "gymnax/CartPole-v1", "--episodes", "3", "--mode", "already_vectorized", "--store", "s.zarr"
    )
    assert proc.returncode == 0, proc.stderr
    proc = amago("collect", "gymnax/CartPole-v1", "--episodes", "3", "--mode", "sync", "--store", "s.zarr")
    assert proc.returncode == 2 and one_line_error(proc) == (
        "error: collect --mode sync: env 'gymnax/CartPole-v1' steps all its copies as one batch; drop --mode (it "
        "defaults to already_vectorized for this env) or give --mode already_vectorized"
    )
    assert TrajectoryStore.open(tmp_path / "s.zarr").partition_info("protected").episodes == 6
