"""Store windows -> torch batches: rl2 from previous reward/action, policy-space actions, masks, loader resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from unit.data.learning_data import make_spec, make_store

from amago_pipe.actions import ActionCodec
from amago_pipe.data.batch import window_to_batch
from amago_pipe.data.loader import BatchLoader, check_partitions
from amago_pipe.errors import DataError
from amago_pipe.spec import ActionSpec


@pytest.mark.parametrize(
    "spec",
    [
        ActionSpec("discrete", (), n=4),
        ActionSpec("continuous", (2,), low=(-2.0, 0.0), high=(2.0, 1.0)),
        ActionSpec("multibinary", (3,), n=3),
        ActionSpec("multidiscrete", (2,), nvec=(3, 2)),
    ],
    ids=lambda s: s.kind,
)
def test_action_features_over_leading_axes_match_a_flat_batch(spec: ActionSpec) -> None:
    rng = np.random.default_rng(0)
    if spec.kind == "discrete":
        env_actions = rng.integers(0, spec.n, size=16)
    elif spec.kind == "continuous":
        env_actions = rng.uniform(np.array(spec.low), np.array(spec.high), size=(16, 2)).astype(np.float32)
    elif spec.kind == "multibinary":
        env_actions = rng.integers(0, 2, size=(16, 3))
    else:
        env_actions = rng.integers(0, np.array(spec.nvec), size=(16, 2))
    codec = ActionCodec(spec)
    stacked = env_actions.reshape(4, 4, *env_actions.shape[1:])  # (B, L, ...) like a training window
    flat = codec.rl2_features(env_actions)  # (16, A)
    assert flat.shape == (16, spec.dim)
    np.testing.assert_allclose(codec.rl2_features(stacked).reshape(16, -1), flat, atol=1e-6)
    np.testing.assert_allclose(codec.to_unit(stacked).reshape(env_actions.shape), codec.to_unit(env_actions))


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_window_batch_rl2_is_previous_reward_and_action(tmp_path, kind: str) -> None:
    store = make_store(tmp_path / "s.zarr", kind, episodes=6, lengths=(4, 12))
    window = store.sample(8, 10, rng=np.random.default_rng(1))
    batch = window_to_batch(window, store.spec)
    codec = ActionCodec(store.spec.action)
    assert batch.rl2.shape == (8, 11, store.spec.rl2_dim)
    assert batch.obs["observation"].shape == (8, 11, 3)
    assert batch.time.dtype == torch.int64 and batch.mask.dtype == torch.bool
    for b in range(8):
        valid = int(window.mask[b].sum())
        # rl2 at t+1 = [r_t, features(a_t)] on valid steps, zeros after
        np.testing.assert_allclose(batch.rl2[b, 1 : valid + 1, 0].numpy(), window.rewards[b, :valid])
        np.testing.assert_allclose(
            batch.rl2[b, 1 : valid + 1, 1:].numpy(), codec.rl2_features(window.actions[b, :valid]), atol=1e-6
        )
        assert torch.all(batch.rl2[b, valid + 1 :] == 0)
        if window.time[b, 0] == 0:
            assert torch.all(batch.rl2[b, 0] == 0)
        else:
            assert batch.rl2[b, 0, 0] == window.prev_rewards[b]
    if kind == "continuous":
        assert batch.actions.shape == (8, 10, 2) and batch.actions.abs().max() <= 1.0
    else:
        assert batch.actions.shape == (8, 10) and batch.actions.dtype == torch.int64


def test_loader_stream_is_reproducible_and_resumable(tmp_path) -> None:
    store = make_store(tmp_path / "s.zarr", episodes=8)
    kwargs = dict(batch_size=4, seq_len=6, partitions={"protected": 1.0}, seed=3)
    with BatchLoader(store, prefetch=3, **kwargs) as loader:
        first = [next(loader) for _ in range(5)]
        assert loader.state_dict()["next_index"] == 5
    with BatchLoader(store, prefetch=1, start=3, **kwargs) as resumed:
        again = next(resumed)
    assert torch.equal(again.rl2, first[3].rl2) and torch.equal(again.actions, first[3].actions)
    sync = BatchLoader(store, threaded=False, **kwargs)
    assert torch.equal(next(sync).obs["observation"], first[0].obs["observation"])


def test_missing_and_empty_partitions_are_clear_errors(tmp_path) -> None:
    store = make_store(tmp_path / "s.zarr", episodes=2)
    with pytest.raises(DataError, match=r"no partition 'fifo'.*it has: protected"):
        check_partitions(store, {"fifo": 1.0}, where="stages.train.partitions")
    store.configure_partition("empty", kind="plain")
    with pytest.raises(DataError, match=r"'empty' hold no episodes"):
        check_partitions(store, {"empty": 1.0}, where="stages.train.partitions")
    assert check_partitions(store, {"protected": 1.0, "empty": 0.5}, where="x")["protected"] > 0


def test_make_spec_kinds() -> None:
    assert make_spec("discrete").action.kind == "discrete"
    assert make_spec("continuous").rl2_dim == 3


def test_loader_task_ids_map_env_names_and_refuse_a_task_without_statistics(tmp_path) -> None:
    store = make_store(tmp_path / "s.zarr", episodes=4)  # every episode's env name is the default one
    (name,) = store.task_names("protected")
    loader = BatchLoader(
        store, batch_size=3, seq_len=4, partitions={"protected": 1.0}, seed=0, threaded=False, task_ids={name: 1}
    )
    batch = next(loader)
    assert batch.task is not None and batch.task.tolist() == [1, 1, 1]
    assert (
        batch.to("cpu").task is not None
        and next(
            BatchLoader(store, batch_size=2, seq_len=4, partitions={"protected": 1.0}, seed=0, threaded=False)
        ).task
        is None
    )
    loader.task_ids = {"other": 0}
    with pytest.raises(
        DataError, match=rf"holds task '{name}', which the agent keeps no value statistics of \(its tasks: other"
    ):
        next(loader)
