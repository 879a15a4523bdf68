"""collect end to end: real envs -> a real Zarr store partition or a real local Minari dataset, via run_collect,
the CollectStage inside the pipeline engine, and the `collect` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from amago_pipe.cli.collect_cmds import build_config, collect
from amago_pipe.envs.collect import run_collect, written_fingerprint
from amago_pipe.errors import ConfigError, DataError, Interrupted
from amago_pipe.store import TrajectoryStore

TOY = "amago_pipe.envs.toy:make_toy_env"


@pytest.fixture(autouse=True)
def minari_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(home))
    return home


def cartpole_cfg(**over: Any) -> Any:
    data: dict[str, Any] = {
        "env": {"id": "CartPole-v1", "n_envs": 4},
        "policies": [
            {"policy": {"type": "random"}, "episodes": 8},
            {"policy": {"type": "cartpole-pd", "exploration": {"type": "egreedy", "epsilon": 0.2}}, "episodes": 4},
        ],
    }
    data.update(over)
    return build_config(data)


def test_mixed_collect_into_store_and_replace_on_rerun(tmp_path: Path) -> None:
    url = str(tmp_path / "store.zarr")
    report = run_collect(cartpole_cfg(), store_url=url, seed=0, tag="p/data")
    store = TrajectoryStore.open(url)
    info = store.partition_info("protected")
    assert (info.episodes, info.timesteps) == (12, report["timesteps"])
    episodes = list(store.iter_episodes("protected"))
    assert [e.source for e in episodes].count("collect:random") == 8
    assert {e.source for e in episodes} == {"collect:random", "collect:cartpole-pd+egreedy"}
    assert report["policies"][1]["return_mean"] > 5 * report["policies"][0]["return_mean"]
    assert report["output"]["fingerprint"] == written_fingerprint(store, "protected", "p/data")
    with store.writer("protected", attrs={"source": "other"}) as w:  # someone else's data stays
        w.add(episodes[0])
    assert written_fingerprint(store, "protected", "p/data") == report["output"]["fingerprint"]
    report2 = run_collect(cartpole_cfg(), store_url=url, seed=1, tag="p/data")
    assert report2["output"]["replaced_segments"] == 1
    assert TrajectoryStore.open(url).partition_info("protected").episodes == 13


def test_collect_refuses_a_store_of_another_env(tmp_path: Path) -> None:
    url = str(tmp_path / "store.zarr")
    run_collect(cartpole_cfg(), store_url=url, seed=0)
    pendulum = build_config(
        {"env": {"id": "Pendulum-v1", "n_envs": 2}, "policies": [{"policy": {"type": "random"}, "episodes": 2}]}
    )
    with pytest.raises(DataError, match="observations"):
        run_collect(pendulum, store_url=url, seed=0)


def test_interrupted_collect_writes_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / "store.zarr")
    calls = {"n": 0}

    def stop_after_a_while() -> None:
        calls["n"] += 1
        if calls["n"] > 30:
            raise Interrupted("stop")

    with pytest.raises(Interrupted):
        run_collect(cartpole_cfg(), store_url=url, seed=0, check_stop=stop_after_a_while)
    assert not Path(url).exists()  # the store it created is gone
    run_collect(cartpole_cfg(), store_url=url, seed=0)
    before = TrajectoryStore.open(url).segments("protected")
    calls["n"] = 0
    with pytest.raises(Interrupted):
        run_collect(cartpole_cfg(), store_url=url, seed=1, check_stop=stop_after_a_while)
    assert TrajectoryStore.open(url).segments("protected") == before  # an existing store is left as it was


def test_minari_output_round_trips_dict_observations(tmp_path: Path) -> None:
    import minari

    cfg = build_config({
        "env": {"factory": TOY, "kwargs": {"action": "continuous"}, "n_envs": 3, "max_episode_steps": 50},
        "policies": [{"policy": {"type": "random"}, "episodes": 5}],
        "output": "minari",
        "dataset_id": "toy/rand-v0",
    })  # fmt: skip
    report = run_collect(cfg, store_url=None, seed=0)
    dataset = minari.load_dataset("toy/rand-v0")
    assert dataset.total_episodes == 5 and dataset.total_steps == report["timesteps"]
    ep = next(iter(dataset.iterate_episodes()))
    T = len(ep.rewards)
    np.testing.assert_array_equal(ep.observations["step"], np.arange(T + 1))
    assert ep.observations["pos"].shape == (T + 1, 2) and ep.actions.shape == (T, 2)
    assert ep.actions.min() >= -2.0 and ep.actions.max() <= 4.0  # env-space actions
    assert ep.terminations[-1] and not ep.truncations.any()


def test_minari_dataset_is_replaced_only_if_collect_made_it(tmp_path: Path, minari_home: Path) -> None:
    cfg = cartpole_cfg(output="minari", dataset_id="cp/mixed-v0")
    first = run_collect(cfg, store_url=None, seed=0)
    second = run_collect(cfg, store_url=None, seed=1)  # replace: true (default) rewrites our own dataset
    assert first["output"]["fingerprint"] != second["output"]["fingerprint"]
    no_replace = cartpole_cfg(output="minari", dataset_id="cp/mixed-v0", replace=False)
    with pytest.raises(ConfigError, match="already exists.*set `replace: true`"):
        run_collect(no_replace, store_url=None, seed=0)
    foreign = minari_home / "cp" / "foreign-v0" / "data"
    foreign.mkdir(parents=True)
    (foreign / "metadata.json").write_text(json.dumps({"algorithm_name": "someone else"}))
    with pytest.raises(ConfigError, match="not made by amago-pipe .*so it is never replaced"):
        run_collect(cartpole_cfg(output="minari", dataset_id="cp/foreign-v0"), store_url=None, seed=0)
    (minari_home / "cp" / "partial-v0" / "data").mkdir(parents=True)
    with pytest.raises(ConfigError, match="metadata.json is missing, unreadable or names no algorithm"):
        run_collect(cartpole_cfg(output="minari", dataset_id="cp/partial-v0"), store_url=None, seed=0)


def test_async_collect_matches_sync(tmp_path: Path) -> None:
    reports = []
    for mode in ("sync", "async"):
        cfg = build_config({"env": {"factory": TOY, "n_envs": 2, "mode": mode}, "policies": [{"policy": {"type": "random"}, "episodes": 6}],
                            "partition": "plain"})  # fmt: skip
        reports.append(run_collect(cfg, store_url=str(tmp_path / f"{mode}.zarr"), seed=3))
    assert reports[0]["total"] == reports[1]["total"]


def test_collect_command(tmp_path: Path) -> None:
    runner = CliRunner()
    args = [
        "CartPole-v1",
        "--policy",
        "cartpole-pd",
        "--exploration",
        "egreedy:0.1",
        "--episodes",
        "4",
        "--n-envs",
        "2",
    ]
    result = runner.invoke(collect, [*args, "--store", str(tmp_path / "s.zarr"), "--partition", "demos"])
    assert result.exit_code == 0, result.output
    assert "collected 4 episodes" in result.output
    assert TrajectoryStore.open(tmp_path / "s.zarr").partition_info("demos").episodes == 4
    result = runner.invoke(collect, [*args, "--minari-id", "cp/cli-v0"])
    assert result.exit_code == 0 and "minari:cp/cli-v0" in result.output
    result = runner.invoke(collect, args)
    assert isinstance(result.exception, ConfigError) and "give exactly one output" in str(result.exception)
    keys = [
        "--obs-keys",
        "observation,desired_goal",
        "--episodes",
        "2",
        "--n-envs",
        "2",
        "--store",
        str(tmp_path / "g"),
    ]
    result = runner.invoke(collect, ["amago_pipe/GoalMaze-v0", *keys])
    assert result.exit_code == 0, result.output
    assert sorted(TrajectoryStore.open(tmp_path / "g").spec.observations) == ["desired_goal", "observation"]


def test_collected_store_exports_to_minari_with_the_env_spaces(tmp_path: Path) -> None:
    import gymnasium as gym
    import minari
    from amago_pipe.converters.to_minari import export_to_minari

    from amago_pipe.envs.toy import make_toy_env

    cfg = build_config(
        {"env": {"factory": TOY, "n_envs": 2}, "policies": [{"policy": {"type": "random"}, "episodes": 3}]}
    )
    run_collect(cfg, store_url=str(tmp_path / "s.zarr"), seed=0)
    export_to_minari(tmp_path / "s.zarr", "protected", "toy/exported-v0")
    env = make_toy_env()
    dataset = minari.load_dataset("toy/exported-v0")
    assert dataset.observation_space == env.observation_space and dataset.action_space == env.action_space
    assert isinstance(dataset.observation_space, gym.spaces.Dict)


SHARED_STORE = """\
version: 1
name: shared
store: store.zarr
stages:
  data:
    type: collect
    env: {id: CartPole-v1, n_envs: 2}
    policies: [{policy: {type: random}, episodes: 3}]
"""


def test_a_collect_stage_of_another_run_dir_keeps_the_first_runs_data(tmp_path: Path, amago: Any) -> None:
    """Two run directories of one pipeline sharing a store: each run's re-run replaces its own episodes only."""
    (tmp_path / "p.yaml").write_text(SHARED_STORE)
    amago("run", "p.yaml", "--run-dir", "runs/a", check=True)
    amago("run", "p.yaml", "--run-dir", "runs/b", "--set", "seed=1", check=True)
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").episodes == 6  # b's stage dropped a's episodes before
    ids = {d: json.loads((tmp_path / f"runs/{d}/pipeline.lock.json").read_text())["run_id"] for d in ("a", "b")}
    tags = sorted(str(s.attrs["collect_stage"]) for s in store.segments("protected"))
    assert tags == [f"shared/data@{ids['a']}", f"shared/data@{ids['b']}"] and ids["a"] != ids["b"]
    before_b = [s.id for s in store.segments("protected") if s.attrs["collect_stage"].endswith(ids["b"])]
    forced = amago("run", "p.yaml", "--run-dir", "runs/a", "--force", check=True)
    report = json.loads((tmp_path / "runs/a/stages/data/report.json").read_text())
    assert report["output"]["replaced_segments"] == 1, forced.stdout
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").episodes == 6
    assert [s.id for s in store.segments("protected") if s.attrs["collect_stage"].endswith(ids["b"])] == before_b
    (tmp_path / "runs/a/pipeline.lock.json").unlink()  # "delete it to re-run every stage": still run a
    amago("run", "p.yaml", "--run-dir", "runs/a", check=True)
    assert _run_id(tmp_path, "a") == ids["a"]
    assert TrajectoryStore.open(tmp_path / "store.zarr").partition_info("protected").episodes == 6


def _run_id(tmp_path: Path, run_dir: str) -> str:
    return str(json.loads((tmp_path / f"runs/{run_dir}/pipeline.lock.json").read_text())["run_id"])
