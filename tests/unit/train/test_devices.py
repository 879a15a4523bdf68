"""Where a learner or an evaluation runs: `auto`, `cpu` or `cuda`, and the error without a GPU."""

from __future__ import annotations

import pytest
import torch

from amago_pipe.errors import ConfigError
from amago_pipe.train.runtime import pick_device

GPU = torch.cuda.is_available()


def test_cpu_and_auto() -> None:
    assert pick_device("cpu", "stages.evaluate.device") == torch.device("cpu")
    assert pick_device("auto", "stages.evaluate.device").type == ("cuda" if GPU else "cpu")


@pytest.mark.skipif(GPU, reason="checks the error without a GPU")
def test_cuda_without_a_gpu_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"stages\.evaluate\.device: 'cuda' was asked for .* use device: auto or cpu"):
        pick_device("cuda", "stages.evaluate.device")
