"""Small stage classes used by the engine tests, loaded by import path like user plugins."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from amago_pipe.config.base import config
from amago_pipe.config.stages import StageConfig
from amago_pipe.pipeline.stage import Stage


@config
class EmitConfig(StageConfig):
    """Writes `value` to out.txt, counting its runs in `counter`."""

    value: int = 1
    """Value written."""
    counter: str = ""
    """JSON file counting how often each stage ran."""
    steps: int = 0
    """Steps of `step_seconds` each, checking for a stop request between steps."""
    step_seconds: float = 0.0
    """Duration of one step."""
    input_file: str = ""
    """An external input whose content is fingerprinted."""
    fail: bool = False
    """Raise a user error instead of finishing."""


class Emit(Stage):
    Config = EmitConfig

    def input_fingerprints(self) -> dict[str, str]:
        if not self.config.input_file:
            return {}
        return {"input_file": Path(self.config.input_file).read_text()}

    def bump(self) -> None:
        if self.config.counter:
            path = Path(self.config.counter)
            counts = json.loads(path.read_text()) if path.exists() else {}
            counts[self.ctx.name] = counts.get(self.ctx.name, 0) + 1
            path.write_text(json.dumps(counts))

    def run(self) -> dict[str, Any]:
        self.bump()
        start = self.first_step()
        for step in range(start, self.config.steps):
            self.ctx.check_stop()
            time.sleep(self.config.step_seconds)
            (self.ctx.out_dir / "progress.txt").write_text(str(step + 1))
        if self.config.fail:
            from amago_pipe.errors import DataError

            raise DataError("the data were bad on purpose")
        upstream = sum(int((d / "out.txt").read_text()) for d in self.ctx.upstream.values())
        (self.ctx.out_dir / "out.txt").write_text(str(self.config.value + upstream))
        return {"value": self.config.value + upstream, "started_at_step": start}

    def first_step(self) -> int:
        return 0


class ResumableEmit(Emit):
    Config = EmitConfig
    resumable = True

    def first_step(self) -> int:
        progress = self.ctx.out_dir / "progress.txt"
        return int(progress.read_text()) if self.ctx.resume and progress.exists() else 0
