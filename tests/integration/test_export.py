"""Exports: round trips of every trajectory encoder x discrete/continuous actions through `Policy`, TorchScript and
ONNX; stepping past max_seq_len; running the programs where amago-pipe cannot be imported; tampered artifacts;
`play` against a real env; `amago-pipe export` of a pipeline's run directory."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from amago_pipe import Policy
from amago_pipe.errors import StoreFormatError
from amago_pipe.export.artifact import MANIFEST, ONNX, TORCHSCRIPT, WEIGHTS
from amago_pipe.export.build import export_policy
from amago_pipe.export.replay import build_replay, replay_agent
from amago_pipe.spec import flatten_obs
from amago_pipe.store import Episode
from amago_pipe.testing.policies import untrained_policy_file

ENCODERS = {
    "ff": {"type": "ff", "d_model": 16},
    "gru": {"type": "gru", "d_model": 16},
    "transformer": {"type": "transformer", "d_model": 16, "n_heads": 2, "n_layers": 2},
    "mamba": {"type": "mamba", "d_model": 16, "n_layers": 1},
}
ENVS = {"discrete": "CartPole-v1", "continuous": "Pendulum-v1"}
MAX_SEQ_LEN = 8


def policy_file(tmp_path: Path, encoder: str, env_id: str, seed: int = 0, **tstep: Any) -> Path:
    """A policy file of an untrained agent for `env_id` (what a train stage writes)."""
    return untrained_policy_file(
        tmp_path / f"{encoder}-{env_id}.safetensors", env_id, seed=seed, max_seq_len=MAX_SEQ_LEN,
        model={"traj_encoder": ENCODERS[encoder],
               "tstep_encoder": {"type": "ff", "d_hidden": 32, "d_output": 16, **tstep}},
        agent={"type": "agent", "actor": {"d_hidden": 32}, "critic": {"d_hidden": 32}},
    )  # fmt: skip


def play(policy: Policy, env_id: str, episodes: int, seed: int = 0) -> list[Episode]:
    """Closed-loop episodes of `policy` in a real env, recorded."""
    env = gym.make(env_id, max_episode_steps=3 * MAX_SEQ_LEN)
    out = []
    policy.reset(1)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        policy.reset_envs([True])
        rows, actions, rewards, done, reward = [flatten_obs(obs)], [], [], False, None
        while not done:
            action = policy.act(obs, reward=reward)
            obs, reward, terminated, truncated, _ = env.step(action)
            rows.append(flatten_obs(obs))
            actions.append(action), rewards.append(reward)
            done = terminated or truncated
        n = len(actions)
        out.append(Episode(obs={k: np.stack([r[k] for r in rows]) for k in rows[0]}, actions=np.asarray(actions),
                           rewards=np.asarray(rewards, np.float32), terminated=np.zeros(n, bool),
                           truncated=np.zeros(n, bool)))  # fmt: skip
    return out


@pytest.mark.parametrize("kind", sorted(ENVS))
@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_round_trip(tmp_path: Path, encoder: str, kind: str) -> None:
    env_id = ENVS[kind]
    source = policy_file(tmp_path, encoder, env_id)
    from amago_pipe.agents.loading import agent_from_weights
    from amago_pipe.train.policy_loading import read_meta

    agent = agent_from_weights(source, read_meta(source))
    warmup = play(Policy(agent, {"policy": read_meta(source)}), env_id, 3)  # episodes longer than max_seq_len
    forms = ["torchscript", "torch_export", "onnx"]
    manifest = export_policy(source, tmp_path / "out", episodes=warmup, forms=forms, tolerance=1e-3)
    check = manifest["verification"]
    assert check["past_max_seq_len"] and check["steps"] > MAX_SEQ_LEN
    assert set(check["max_error"]) == {"weights", *forms} and max(check["max_error"].values()) <= 1e-3
    assert sorted(manifest["files"]) == ["README.md", "policy.onnx", "policy.pt", "policy.pt2", "weights.safetensors"]

    policy = Policy.load(tmp_path / "out")
    episodes = play(policy, env_id, 2, seed=10)
    taken = np.concatenate([ep.actions for ep in episodes])
    # the loaded Policy acts as the original agent does when replaying what it did (rl2, time, resets included)
    replay = build_replay(episodes[:1], episodes[0].length)
    np.testing.assert_allclose(replay_agent(agent, replay)[:, 0], episodes[0].actions, rtol=1e-5, atol=1e-6)
    assert taken.dtype == (np.int64 if kind == "discrete" else np.float32)


def test_one_hot_key_round_trip(tmp_path: Path) -> None:
    """A `one_hot` key (FrozenLake's Discrete ids) exports: every form verified against the agent, and the loaded
    Policy acts as the agent does."""
    source = policy_file(tmp_path, "gru", "FrozenLake-v1", keys={"observation": {"one_hot": 16}})
    from amago_pipe.agents.loading import agent_from_weights
    from amago_pipe.train.policy_loading import read_meta

    agent = agent_from_weights(source, read_meta(source))
    warmup = play(Policy(agent, {"policy": read_meta(source)}), "FrozenLake-v1", 6)
    assert len(np.unique(np.concatenate([ep.obs["observation"] for ep in warmup]))) > 1  # several ids seen
    forms = ["torchscript", "torch_export", "onnx"]
    manifest = export_policy(source, tmp_path / "out", episodes=warmup, forms=forms, tolerance=1e-4)
    errors = manifest["verification"]["max_error"]
    assert set(errors) == {"weights", *forms} and max(errors.values()) <= 1e-4
    episodes = play(Policy.load(tmp_path / "out"), "FrozenLake-v1", 2, seed=10)
    replay = build_replay(episodes[:1], episodes[0].length)
    np.testing.assert_array_equal(replay_agent(agent, replay)[:, 0], episodes[0].actions)


PORTABLE = """
import sys, json
sys.modules["amago_pipe"] = None  # amago-pipe must not be needed
import numpy as np, torch, onnxruntime as ort
try:
    import amago_pipe  # noqa
    raise SystemExit("amago_pipe importable")
except ImportError:
    pass
folder = sys.argv[1]
manifest = json.load(open(folder + "/manifest.json"))
inputs = [i["name"] for i in manifest["program"]["inputs"]]
data = np.load(folder + "/../steps.npz")
T = data["time"].shape[0]
module = torch.jit.load(folder + "/policy.pt")
exported = torch.export.load(folder + "/policy.pt2").module()
session = ort.InferenceSession(folder + "/policy.onnx")
used = {i.name for i in session.get_inputs()}
state_pt = [torch.as_tensor(data[f"init_{i}"]) for i in range(len(manifest["program"]["state"]))]
state_ox = [s.numpy() for s in state_pt]
state_ex = list(state_pt)
acts_pt, acts_ox, acts_ex = [], [], []
init = [data[f"init_{i}"] for i in range(len(manifest["program"]["state"]))]
for t in range(T):
    if t > 0 and data["time"][t][0] == 0:  # a new episode: memory back to its initial value (one env here)
        state_pt, state_ox = [torch.as_tensor(s) for s in init], [s.copy() for s in init]
        state_ex = [torch.as_tensor(s) for s in init]
    step = [data["obs"][t], data["prev_action"][t], data["prev_reward"][t], data["time"][t]]
    out = module(*[torch.as_tensor(a) for a in step], *state_pt)
    acts_pt.append(out[0].numpy()); state_pt = list(out[1:])
    out = exported(*[torch.as_tensor(a) for a in step], *state_ex)
    acts_ex.append(out[0].numpy()); state_ex = list(out[1:])
    feed = {n: np.asarray(a) for n, a in zip(inputs, step + state_ox) if n in used}
    out = session.run(None, feed)
    acts_ox.append(out[0]); state_ox = out[1:]
np.savez(folder + "/../portable.npz", torchscript=np.stack(acts_pt), torch_export=np.stack(acts_ex),
         onnx=np.stack(acts_ox))
"""


def test_programs_run_without_amago_pipe_past_max_seq_len(tmp_path: Path) -> None:
    source = policy_file(tmp_path, "transformer", "Pendulum-v1", seed=3)
    from amago_pipe.agents.loading import agent_from_weights
    from amago_pipe.train.policy_loading import read_meta

    agent = agent_from_weights(source, read_meta(source))
    episodes = play(Policy(agent, {"policy": read_meta(source)}), "Pendulum-v1", 1)
    forms = ["torchscript", "torch_export", "onnx"]
    export_policy(source, tmp_path / "out", episodes=episodes, forms=forms, tolerance=1e-3)
    replay = build_replay(episodes, 5 * MAX_SEQ_LEN)  # one env, 40 steps through a context of 8
    expected = replay_agent(agent, replay)
    init = agent.model.init_state(1, "cpu")
    np.savez(
        tmp_path / "steps.npz", obs=replay.obs["observation"], prev_action=replay.prev_action,
        prev_reward=replay.prev_reward, time=replay.time,
        **{f"init_{i}": init[k].numpy() for i, k in enumerate(sorted(init))},
    )  # fmt: skip
    script = tmp_path / "portable.py"
    script.write_text(PORTABLE)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], cwd=tmp_path, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = np.load(tmp_path / "portable.npz")
    for form in forms:
        np.testing.assert_allclose(got[form], expected, rtol=1e-4, atol=1e-4)


def test_tampered_artifacts_are_refused(tmp_path: Path, amago: Any) -> None:
    source = policy_file(tmp_path, "gru", "CartPole-v1")
    from amago_pipe.agents.loading import agent_from_weights
    from amago_pipe.train.policy_loading import read_meta

    agent = agent_from_weights(source, read_meta(source))
    episodes = play(Policy(agent, {"policy": read_meta(source)}), "CartPole-v1", 2)
    export_policy(source, tmp_path / "good", episodes=episodes, forms=["torchscript"], tolerance=1e-3)
    Policy.load(tmp_path / "good")

    def variant(name: str, change: Any) -> Path:
        folder = tmp_path / name
        subprocess.run(["cp", "-r", str(tmp_path / "good"), str(folder)], check=True)
        change(folder)
        return folder

    def flip(folder: Path) -> None:
        data = bytearray((folder / WEIGHTS).read_bytes())
        data[-1] ^= 0xFF
        (folder / WEIGHTS).write_bytes(bytes(data))

    def newer(folder: Path) -> None:
        m = json.loads((folder / MANIFEST).read_text())
        (folder / MANIFEST).write_text(json.dumps({**m, "format": 99}))

    cases = {
        "flipped": (flip, r"weights.safetensors: checksum mismatch"),
        "missing": (lambda f: (f / TORCHSCRIPT).unlink(), r"file 'policy.pt' listed in the manifest is missing"),
        "newer": (newer, r"export format 99 .* is newer than this amago-pipe reads \(format 1\); upgrade"),
        "truncated": (lambda f: (f / MANIFEST).write_text((f / MANIFEST).read_text()[:50]), r"unreadable or truncated"),
        "empty": (lambda f: (f / MANIFEST).unlink(), r"not an amago-pipe export \(no manifest.json\)"),
    }
    for name, (change, message) in cases.items():
        folder = variant(name, change)
        with pytest.raises(StoreFormatError, match=message):
            Policy.load(folder)
        proc = amago("play", str(folder), "--env", "CartPole-v1", "--episodes", "1")
        assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr

    proc = amago("play", str(tmp_path / "good"), "--env", "Pendulum-v1", "--episodes", "1")
    assert proc.returncode == 3 and "does not match the exported policy's data spec" in proc.stderr + proc.stdout
    proc = amago("play", str(tmp_path / "good"), "--env", "CartPole-v1", "--episodes", "2", check=True)
    assert "mean return" in proc.stdout
    if importlib.util.find_spec("imageio") is None:  # a video needs the optional imageio: said before playing
        proc = amago("play", str(tmp_path / "good"), "--env", "CartPole-v1", "--video", "v.mp4")
        assert proc.returncode == 2 and "pip install 'imageio[ffmpeg]'" in proc.stderr + proc.stdout
    assert ONNX not in json.loads((tmp_path / "good" / MANIFEST).read_text())["files"]


PIPELINE = """
version: 1
name: ex
store: store.zarr
stages:
  collect:
    type: collect
    env: {id: amago_pipe/TMaze-v0, kwargs: {corridor_length: 12}, n_envs: 2}
    policies: [{policy: {type: tmaze-walker}, episodes: 6}]
  train:
    type: train
    max_seq_len: 8
    batch_size: 4
    epochs: 1
    updates_per_epoch: 2
    warmup_steps: 1
    model: {traj_encoder: {type: transformer, d_model: 16, n_heads: 2, n_layers: 1}}
  evaluate:
    type: evaluate
    env: {id: amago_pipe/TMaze-v0, kwargs: {corridor_length: 12}, n_envs: 2}
    episodes: 2
  export:
    type: export
"""


def test_export_stage_and_command(tmp_path: Path, amago: Any) -> None:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    amago("run", "p.yaml", check=True)
    artifact = tmp_path / "runs/ex/stages/export/artifact"
    manifest = json.loads((artifact / MANIFEST).read_text())
    assert manifest["evaluation"]["episodes"] == 2 and manifest["source"]["train_stage"] == "train"
    assert manifest["verification"]["past_max_seq_len"]  # T-Maze episodes (13 steps) outlast the context of 8
    assert "## Scores" in (artifact / "README.md").read_text()
    again = amago("run", "p.yaml", check=True)
    assert again.stdout.count("unchanged") == 4

    proc = amago("export", "runs/ex", "--out", "cli-export", "--form", "torchscript", check=True)
    assert "verified on 4 episodes" in proc.stdout
    proc = amago("play", "cli-export", "--env", "amago_pipe/TMaze-v0", "--env-kwarg", "corridor_length=12",
                 "--episodes", "3", check=True)  # fmt: skip
    assert "success rate" in proc.stdout
    proc = amago("play", "cli-export", "--env", "amago_pipe/TMaze-v0", "--obs-keys", "image")
    assert proc.returncode == 2 and "--env.obs_keys: ['image'] not in the env's observations" in proc.stderr
    bad = amago("export", "runs/ex", "--out", "x", "--stage", "evaluate")
    assert bad.returncode == 2 and "not a train stage" in bad.stderr + bad.stdout
    assert not (tmp_path / "x").exists()


def test_policy_needs_no_store_yaml_training_or_env_code() -> None:
    code = (
        "import sys; from amago_pipe import Policy; "
        "print(sorted(m for m in sys.modules if m.startswith(('amago_pipe.store', 'amago_pipe.train', "
        "'amago_pipe.pipeline', 'amago_pipe.data', 'amago_pipe.envs', 'yaml', 'zarr', 'accelerate', 'gymnasium'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout
