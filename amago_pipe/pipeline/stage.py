"""What a stage implementation sees: the `Stage` base class and its `StageContext`.

Stage types (convert, collect, relabel, train, evaluate, export, user classes) subclass `Stage`.
The engine owns fingerprints, the lock file and the run directory; a stage only does its work
inside `ctx.out_dir` (and the shared store) and checks `ctx.check_stop()` now and then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from amago_pipe.config.pipeline import PipelineConfig
from amago_pipe.config.stage_refs import train_stage_candidates
from amago_pipe.config.stages import StageConfig
from amago_pipe.errors import ConfigError, Interrupted
from amago_pipe.pipeline.lockfile import tagged
from amago_pipe.progress import Progress, SilentProgress

if TYPE_CHECKING:
    from amago_pipe.pipeline.preflight import Preflight


@dataclass
class StageContext:
    """Everything a running stage may use; built by the engine for each stage run."""

    name: str
    out_dir: Path
    """This stage's output folder `runs/<name>/stages/<stage>/`; it holds whatever the stage writes."""
    pipeline: PipelineConfig
    run_dir: Path
    upstream: dict[str, Path]
    """Output folders of the stages this one `needs`, by stage name."""
    needs: dict[str, list[str]] = field(default_factory=dict)
    """Every stage's resolved `needs` (the pipeline's graph)."""
    resume: bool = False
    """True when a resumable stage continues its previous output in `out_dir` (interrupted, or finished
    and extended, e.g. more `epochs`)."""
    seed: int = 0
    run_id: str = ""
    """The run directory's identity (see `LockFile.run_id`); '' for one made before run ids."""
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("amago_pipe.stage"))
    stop_event: threading.Event = field(default_factory=threading.Event)
    progress_factory: Any = None
    """Callable `(description, total, unit) -> context manager of Progress`, set by the engine."""

    @property
    def store(self) -> str:
        """The pipeline's store path/URL (relative paths are taken from the working directory)."""
        path = self.pipeline.store_path
        if not path:
            raise ConfigError(
                f"stages.{self.name}: this stage needs a store; set `store:` at the top of the pipeline",
                path="store",
            )
        return path

    @property
    def tag(self) -> str:
        """What this stage's store segments are tagged with: `<pipeline>/<stage>@<run id>` (`<pipeline>/<stage>`
        without a run id). A re-run replaces the segments of its own tag only, never another run's."""
        return tagged(f"{self.pipeline.name}/{self.name}", self.run_id)

    def train_stage(self) -> str:
        """The train stage this evaluate or export stage loads (`amago_pipe.config.stage_refs.train_stage_candidates`)."""
        found = train_stage_candidates(self.pipeline, self.needs, self.name)
        if len(found) != 1:  # refused when the pipeline was loaded; a hand-built context can still get here
            raise ConfigError(
                f"stages.{self.name}: expected one train stage upstream (found: {', '.join(found) or 'none'}); "
                "set `train_stage:`",
                path=f"stages.{self.name}.train_stage",
            )
        return found[0]

    def configure_store(self, store: Any) -> None:
        """Apply the pipeline's `store: {partitions: ...}` settings (e.g. a fifo capacity) to an open store."""
        for name, settings in self.pipeline.partition_settings.items():
            kind = settings.kind or ("fifo" if settings.capacity_timesteps is not None else None)
            store.configure_partition(name, kind=kind, capacity_timesteps=settings.capacity_timesteps)

    def should_stop(self) -> bool:
        """True once the run was asked to stop (SIGINT/SIGTERM)."""
        return self.stop_event.is_set()

    def check_stop(self) -> None:
        """Raise `Interrupted` if the run was asked to stop; call between units of work."""
        if self.stop_event.is_set():
            raise Interrupted(f"stage '{self.name}' stopped on request")

    @contextmanager
    def progress(self, description: str, total: float | None = None, unit: str = "it") -> Iterator[Progress]:
        """A live progress bar (silent when the console is quiet or not a terminal)."""
        if self.progress_factory is None:
            yield SilentProgress()
            return
        with self.progress_factory(description, total, unit) as task:
            yield task


class Stage:
    """Base class of stage implementations; a config class names its implementation in `impl`."""

    resumable: ClassVar[bool] = False
    """True when the stage can continue from its own partial output (e.g. checkpoints)."""
    distributed: ClassVar[bool] = False
    """True when every process of a multi-process launch (torchrun/accelerate) runs it; else rank 0 only."""
    resume_safe: ClassVar[tuple[str, ...]] = ()
    """Config keys (and their sub-keys) whose change keeps the partial output valid: a resumable stage
    resumes instead of restarting (e.g. `epochs`, `logging`)."""
    side_outputs: ClassVar[tuple[str, ...]] = ()
    """Top-level files or folders of `out_dir` left out of the output hash (logs written by other tools)."""
    untracked: ClassVar[tuple[str, ...]] = ()
    """Config keys (and their sub-keys) that change nothing the stage hands on (e.g. `logging`): left out of its
    config hash, so changing one re-runs neither the stage nor its dependents (it applies when the stage next
    runs for another reason); a resume continues under a changed one."""

    def __init__(self, config: StageConfig, ctx: StageContext):
        self.config = config
        self.ctx = ctx

    def input_fingerprints(self) -> dict[str, str]:
        """Hashes of inputs outside the run directory (a source file, a store partition)."""
        return {}

    def output_fingerprints(self) -> dict[str, str]:
        """Hashes of outputs outside the stage folder (e.g. the store partition it wrote)."""
        return {}

    def preflight(self, checks: Preflight) -> None:
        """Check, before any stage of the run starts, what the config, the registered envs and the store's DataSpec
        tell about this stage; raise ConfigError (MissingDependencyError for a package) naming the key. Writes
        nothing. The engine checks the env ids of every stage that will run before calling it."""

    def resume_point(self) -> str:
        """Where a resume of the partial output in `out_dir` continues (e.g. `epoch 9`); '' when unknown."""
        return ""

    def resume_blocker(self) -> str:
        """Why the partial output cannot be continued under this config (then it restarts); '' when it can."""
        return ""

    def run(self) -> dict[str, Any]:
        """Do the work; return summary metrics (the first one is shown in the summary table)."""
        raise NotImplementedError
