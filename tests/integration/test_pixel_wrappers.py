"""A pixel env of our own behind `wrappers:` (a plugin, resize, grayscale, frame stack) through collect -> train ->
evaluate -> export -> play by the real CLI: the store holds what the agent sees, the export records the wrappers and
`play` builds the env behind them; an evaluate env with other wrappers is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amago_pipe.store import TrajectoryStore

WRAPPERS = """[{type: "pixel_env:Invert", kwargs: {offset: 3}}, {type: resize, size: [12, 12]}, {type: grayscale},
                   {type: frame_stack, k: 2}]"""
PIPELINE = """\
version: 1
name: pix
store: {{path: store.zarr, cache: {{ram_gib: 0}}}}  # train samples through the disk tier
stages:
  collect:
    type: collect
    env: {{factory: "pixel_env:make_pixel_env", kwargs: {{length: 5}}, n_envs: 2, wrappers: {collect}}}
    policies: [{{policy: {{type: random}}, episodes: 6}}]
  train:
    type: train
    max_seq_len: 6
    batch_size: 4
    epochs: 1
    updates_per_epoch: 2
    warmup_steps: 1
    model:
      tstep_encoder: {{type: cnn, cnn: impala, impala_channels: [4], img_features: 8, vector_features: 8, d_output: 8}}
      traj_encoder: {{type: ff, d_model: 8}}
    agent: {{type: agent, actor: {{d_hidden: 8}}, critic: {{d_hidden: 8, num_critics: 2}}}}
    logging: {{plots: false}}
  eval:
    type: evaluate
    env: {{factory: "pixel_env:make_pixel_env", kwargs: {{length: 5}}, n_envs: 2, wrappers: {evaluate}}}
    episodes: 2
    plots: false
  export:
    type: export
    verify_episodes: 1
    forms: [torchscript]
"""


def write(tmp_path: Path, *, evaluate: str = WRAPPERS) -> None:
    (tmp_path / "p.yaml").write_text(PIPELINE.format(collect=WRAPPERS, evaluate=evaluate))


def test_wrappers_reach_the_store_the_export_and_play(tmp_path: Path, amago: Any) -> None:
    write(tmp_path)
    amago("run", "p.yaml", check=True, timeout=300)
    spec = TrajectoryStore.open(str(tmp_path / "store.zarr")).spec
    assert (tmp_path / "store.zarr/.cache/spill").is_dir()  # `cache: {ram_gib: 0}` reached the train's sampler
    obs = spec.observations["observation"]
    assert (obs.shape, obs.dtype) == ((12, 12, 2), "uint8")  # what the agent sees, stored as uint8
    assert [t["type"] for t in spec.transforms or []] == ["pixel_env:Invert", "resize", "grayscale", "frame_stack"]
    artifact = tmp_path / "runs/pix/stages/export/artifact"
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["policy"]["spec"]["transforms"] == spec.transforms
    assert (
        "Env wrappers, in order: pixel_env:Invert(kwargs={'offset': 3}), resize(size=[12, 12])"
        in (artifact / "README.md").read_text()
    )
    # play builds the recorded env behind the recorded wrappers: the policy gets (12, 12, 2) frames
    played = amago("play", str(artifact), "--episodes", "2", check=True)
    assert "mean return" in played.stdout and "over 2 episodes" in played.stdout, played.stdout


def test_an_evaluate_env_with_other_wrappers_is_refused_before_anything_runs(tmp_path: Path, amago: Any) -> None:
    write(tmp_path, evaluate="""[{type: "pixel_env:Invert", kwargs: {offset: 3}}, {type: resize, size: [12, 12]},
                   {type: grayscale}, {type: frame_stack, k: 3}]""")  # fmt: skip
    proc = amago("run", "p.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out
    assert "stages.eval.env.wrappers: [pixel_env:Invert(kwargs={'offset': 3}), resize(size=[12, 12]), grayscale(), " \
        "frame_stack(k=3)], but the training data (what stage 'collect' collects" in out, out  # fmt: skip
    assert (
        "came through [pixel_env:Invert(kwargs={'offset': 3}), resize(size=[12, 12]), grayscale(), frame_stack(k=2)]"
        in out
    )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "store.zarr").exists()
    write(tmp_path, evaluate="[{type: grayscale}, {type: reszie, size: [12, 12]}]")
    proc = amago("validate", "p.yaml")
    assert (
        proc.returncode == 2
        and "stages.eval.env.wrappers.1.type: unknown wrapper 'reszie'" in proc.stdout + proc.stderr
    )
    assert "did you mean 'resize'?" in proc.stdout + proc.stderr


def test_collect_cli_applies_wrappers_in_order_and_refuses_a_bad_one(tmp_path: Path, amago: Any) -> None:
    base = ("collect", "pixel_env:PixelSide-v0", "--episodes", "2", "--n-envs", "1", "--store", "c.zarr")
    amago(*base, "--wrapper", "{type: resize, size: [8, 8]}", "--wrapper", "grayscale", check=True)
    spec = TrajectoryStore.open(str(tmp_path / "c.zarr")).spec
    assert spec.observations["observation"].shape == (8, 8, 1)
    assert [t["type"] for t in spec.transforms or []] == ["resize", "grayscale"]
    proc = amago(*base[:-1], "d.zarr", "--wrapper", "{size: [8, 8]}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "collect --wrapper: '{size: [8, 8]}' is neither" in out, out
    assert "Traceback" not in out and not (tmp_path / "d.zarr").exists()
