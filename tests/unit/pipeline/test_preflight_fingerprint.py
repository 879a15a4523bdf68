"""What a stage's config hash leaves out: the keys its stage type declares `untracked` (the train stage's `logging` and
`prefetch`), so a change to them re-runs neither the stage nor its dependents."""

from __future__ import annotations

from amago_pipe.hashing import hash_json
from amago_pipe.pipeline.fingerprint import without_keys
from amago_pipe.pipeline.stages.train import TrainStage


def config(**stage: object) -> dict:
    return {"stage": {"type": "train", "lr": 0.001, **stage}, "store": "s.zarr", "seed": 0}


def test_untracked_keys_leave_the_hash_and_the_rest_stays() -> None:
    a = config(logging={"log_interval": 50, "wandb": "disabled"}, prefetch=4)
    b = config(logging={"log_interval": 7, "wandb": "offline"}, prefetch=2)
    untracked = TrainStage.untracked
    assert untracked == ("logging", "prefetch")
    assert hash_json(without_keys(a, untracked)) == hash_json(without_keys(b, untracked))
    assert hash_json(without_keys(a, untracked)) != hash_json(without_keys(config(lr=0.01), untracked))
    assert a["stage"]["logging"]["log_interval"] == 50  # the recorded config keeps every key


def test_dotted_keys_and_missing_keys() -> None:
    a = config(logging={"log_interval": 50, "plots": True})
    assert without_keys(a, ("logging.plots", "nothing.here", "absent"))["stage"]["logging"] == {"log_interval": 50}
