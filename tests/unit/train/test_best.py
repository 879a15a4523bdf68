"""The validation-best record and early stopping's patience."""

from __future__ import annotations

import math

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.online import OnlineConfig, PartitionPhase
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.train.best import last_data_change, patience_spent, record_validation


def test_a_tie_is_no_new_best_and_uncounted_validations_leave_since_alone() -> None:
    best: dict = {}
    assert record_validation(best, 2, 0.5, counts=True) and best == {"epoch": 2, "return_mean": 0.5, "since": 0}
    assert not record_validation(best, 4, 0.5, counts=True) and best["since"] == 1
    assert not record_validation(best, 6, 0.1, counts=False) and best["since"] == 1
    assert record_validation(best, 8, 0.7, counts=True) and best == {"epoch": 8, "return_mean": 0.7, "since": 0}


def test_a_non_finite_best_is_replaced_by_the_next_validation() -> None:
    best: dict = {}
    record_validation(best, 1, math.nan, counts=True)
    assert record_validation(best, 2, -5.0, counts=True) and best["epoch"] == 2
    old = {"epoch": 3, "return_mean": 1.0}  # a record written before `since` existed
    assert not record_validation(old, 4, 0.5, counts=True) and old["since"] == 1


def test_patience_and_the_last_change_of_training_data() -> None:
    assert not patience_spent({}, 2) and not patience_spent({"epoch": 1, "return_mean": 0.0, "since": 1}, 2)
    assert patience_spent({"epoch": 1, "return_mean": 0.0, "since": 2}, 2)
    assert patience_spent({"epoch": 1, "return_mean": 0.0}, 0) and not patience_spent(
        {"epoch": 1, "return_mean": 0.0}, 1
    )
    assert last_data_change(TrainStageConfig()) == 0
    phased = TrainStageConfig(
        partitions={"protected": 1.0, "fifo": 0.0},
        epochs=10,
        online=OnlineConfig(env=EnvConfig(id="CartPole-v1"), start_at_epoch=2),
        partition_schedule=[PartitionPhase(from_epoch=5, weights={"protected": 0.5, "fifo": 0.5})],
    )
    assert last_data_change(phased) == 5
