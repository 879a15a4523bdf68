"""Run a pipeline: decide per stage (run, resume, skip — and why), execute, record in the lock file.

A run is planned first, and the stages that will run are checked (`Stage.preflight`) before anything is written;
then decisions are made again stage by stage just before each runs, so a stage's inputs may be produced by the
stages before it. The console is a `Reporter` (see console.py); this module prints nothing.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from amago_pipe.config.base import to_dict
from amago_pipe.config.loader import LoadedPipeline
from amago_pipe.config.yaml_io import dump_yaml
from amago_pipe.errors import AmagoPipeError, ConfigError, Interrupted, LockError, StageFailed, out_of_space
from amago_pipe.hashing import hash_json, hash_tree
from amago_pipe.pipeline.fingerprint import STAGE_LOG, as_read_today, changed_keys, without_keys
from amago_pipe.pipeline.graph import FORCE_ALL, Selection, select, topological_order
from amago_pipe.pipeline.layout import (
    check_store_placement,
    default_run_dir,
    stage_dir,
    store_elsewhere_warning,
    superseded_path,
)
from amago_pipe.pipeline.lockfile import LOCK_FILE, LockFile, RunLock, StageRecord, write_atomic
from amago_pipe.pipeline.preflight import Preflight, raise_all
from amago_pipe.pipeline.records import write_command
from amago_pipe.pipeline.signals import StopOnSignal
from amago_pipe.pipeline.stage import Stage, StageContext
from amago_pipe.processes import alive_here

log = logging.getLogger("amago_pipe")


@dataclass
class Decision:
    """What the runner does with one stage, and why."""

    name: str
    action: str
    """run | resume | skip | excluded | busy (its recorded process still runs it on this host)."""
    reason: str
    record: StageRecord = field(default_factory=StageRecord)
    resume_at: str = ""
    """Where a resume continues (e.g. `epoch 9`), when the stage knows."""
    move_to: Path | None = None
    """Where a restarting resumable stage's old outputs are moved (they are never deleted)."""


class Reporter(Protocol):
    """What the runner tells the console."""

    def header(self, loaded: LoadedPipeline, run_dir: Path) -> None: ...
    def decision(self, d: Decision) -> None: ...
    def stage_started(self, name: str) -> None: ...
    def stage_finished(self, name: str, record: StageRecord) -> None: ...
    def progress_factory(self) -> Any: ...
    def summary(self, decisions: list[Decision], lock: LockFile) -> None: ...


class Runner:
    """Plans and runs the stages of one loaded pipeline inside one run directory."""

    def __init__(self, loaded: LoadedPipeline, run_dir: Path | None, reporter: Reporter):
        self.loaded = loaded
        self.run_dir = Path(run_dir) if run_dir else default_run_dir(loaded)
        self.reporter = reporter
        self.stop_event = threading.Event()
        self._stopper: StopOnSignal | None = None
        self.decisions: list[Decision] = []
        self.rank = int(os.environ.get("RANK", "0"))
        """Process rank under torchrun/accelerate; ranks > 0 run only `distributed` stages and record nothing."""
        self.run_id = ""
        """The run directory's id (from its lock file), which the stages tag their store segments with."""
        self._tree_hashes: dict[str, str] = {}
        """Stage folder hashes computed while planning, reused when deciding again (a stage folder changes only
        when its stage runs)."""

    @property
    def signum(self) -> int:
        """The signal that asked this run to stop (0: none)."""
        return self._stopper.signum if self._stopper is not None else 0

    # ---- planning -------------------------------------------------------------------------------
    def _context(self, name: str, resume: bool = False) -> StageContext:
        cfg = self.loaded.config
        return StageContext(
            name=name,
            out_dir=stage_dir(self.run_dir, name),
            pipeline=cfg,
            run_dir=self.run_dir,
            upstream={d: stage_dir(self.run_dir, d) for d in self.loaded.needs[name]},
            needs=self.loaded.needs,
            resume=resume,
            run_id=self.run_id,
            seed=(cfg.seed * 1_000_003 + zlib.crc32(name.encode())) % 2**31,
            log=logging.getLogger(f"amago_pipe.stage.{name}"),
            stop_event=self.stop_event,
            progress_factory=self.reporter.progress_factory(),
        )

    def _stage(self, name: str, ctx: StageContext) -> Stage:
        stage_cfg = self.loaded.config.stages[name]
        impl = stage_cfg.implementation()
        if not (isinstance(impl, type) and issubclass(impl, Stage)):
            raise ConfigError(
                f"stages.{name}.type: '{stage_cfg.type}' does not name a Stage subclass", path=f"stages.{name}"
            )
        return impl(stage_cfg, ctx)

    def stage_config(self, name: str) -> dict[str, Any]:
        """What identifies a stage's config (as JSON): its fields but `description`, the store and the seed."""
        stage = {k: v for k, v in to_dict(self.loaded.config.stages[name]).items() if k != "description"}
        config = {"stage": stage, "store": self.loaded.config.store_path, "seed": self.loaded.config.seed}
        return dict(json.loads(json.dumps(config, default=str)))

    def config_hash(self, name: str, config: dict[str, Any]) -> str:
        """The hash identifying a `stage_config`: without the keys its stage type leaves `untracked` (`logging`)."""
        untracked = getattr(self.loaded.config.stages[name].implementation(), "untracked", ())
        return hash_json(without_keys(config, untracked))

    def _same_config(self, name: str, prev: StageRecord, new: StageRecord) -> bool:
        """Whether a recorded config has the identity of `new`'s (recomputed from the recorded keys, so records
        made before keys were left out still match)."""
        if prev.config:
            return self.config_hash(name, self._recorded(name, prev)) == new.config_hash
        return prev.config_hash in (new.config_hash, hash_json(new.config))

    def _recorded(self, name: str, prev: StageRecord) -> dict[str, Any]:
        """A stage's recorded config with keys added since at their defaults (as recorded if it no longer loads)."""
        return as_read_today(prev.config, name) or prev.config

    def output_hash(self, stage: Stage, *, reuse: bool = False) -> str:
        """Hash of a stage's folder and external outputs; `reuse`: the folder hash of this run's planning pass."""
        name = stage.ctx.name
        files = self._tree_hashes.get(name) if reuse else None
        if files is None:
            files = hash_tree(stage.ctx.out_dir, exclude=(STAGE_LOG, *type(stage).side_outputs))
            self._tree_hashes[name] = files
        return hash_json({"files": files, "external": stage.output_fingerprints()})

    def decide(self, name: str, lock: LockFile, sel: Selection, rerun: set[str], selected: set[str]) -> Decision:
        """Decide one stage given the stages already chosen to (re-)run upstream."""
        d = self._decide(name, lock, sel, rerun, selected)
        out_dir = stage_dir(self.run_dir, name)
        if (
            d.action == "run"
            and out_dir.is_dir()
            and any(out_dir.iterdir())
            and getattr(self.loaded.config.stages[name].implementation(), "resumable", False)
        ):
            d.move_to = superseded_path(self.run_dir, name)  # e.g. checkpoints: never deleted silently
        return d

    def _decide(self, name: str, lock: LockFile, sel: Selection, rerun: set[str], selected: set[str]) -> Decision:
        prev = lock.record(name)
        if name not in selected:
            return Decision(name, "excluded", "not selected", prev)
        config = self.stage_config(name)
        new = StageRecord(config_hash=self.config_hash(name, config), config=config)
        if prev.status == "running" and self.rank == 0 and alive_here(prev.host, prev.pid, prev.started):
            return Decision(name, "busy", f"pid {prev.pid} on this host is still running it", prev)
        up_rerun = [d for d in self.loaded.needs[name] if d in rerun]
        if sel.force in (FORCE_ALL, name):
            return Decision(name, "run", "forced", new)
        if up_rerun:
            return Decision(name, "run", f"upstream '{up_rerun[0]}' re-runs", new)
        self._check_upstream_done(name, lock)
        stage = self._stage(name, self._context(name))
        new.input_hashes = stage.input_fingerprints()
        new.upstream = {d: lock.record(d).output_hash for d in self.loaded.needs[name]}
        new.fingerprint = hash_json([new.config_hash, new.input_hashes, new.upstream])
        status = "interrupted" if prev.status == "running" else prev.status  # its process is gone
        if status == "never run":
            return Decision(name, "run", "never run", new)
        inputs = sorted(
            k for k in {*prev.input_hashes, *new.input_hashes} if prev.input_hashes.get(k) != new.input_hashes.get(k)
        )
        upstream = [d for d in new.upstream if prev.upstream.get(d) != new.upstream[d]]
        same = self._same_config(name, prev, new)
        if status == "done" and same and not inputs and not upstream:
            if self.output_hash(stage, reuse=True) != prev.output_hash:
                return Decision(name, "run", "outputs missing or modified", new)
            untracked = _shown_keys(self._recorded(name, prev), config) if prev.config else []
            why = (
                f" ({', '.join(untracked)}: changes nothing it hands on; applies when it next runs)"
                if untracked
                else ""
            )
            return Decision(name, "skip", f"unchanged{why}", prev)
        keys = None if not same and not prev.config else _shown_keys(self._recorded(name, prev), config)
        restart = self._restart_reason(stage, status, keys, inputs, upstream)
        if restart:
            return Decision(name, "run", restart, new)
        changed = f"changed: {', '.join(keys or [])}" if keys else ""
        reason = "; ".join(r for r in ("interrupted" if status == "interrupted" else "", changed) if r)
        return Decision(name, "resume", reason, new, resume_at=stage.resume_point())

    def _check_upstream_done(self, name: str, lock: LockFile) -> None:
        for dep in self.loaded.needs[name]:
            if lock.record(dep).status != "done":
                raise ConfigError(
                    f"stage '{name}' needs '{dep}', which has not completed (status: {lock.record(dep).status}); "
                    f"run it first (drop --only/--from)"
                )

    @staticmethod
    def _restart_reason(
        stage: Stage, status: str, keys: list[str] | None, inputs: list[str], upstream: list[str]
    ) -> str:
        """Why a stage that ran before must start over; '' when it can resume from its partial output."""
        if keys is None:
            return "config changed"
        safe = (*type(stage).resume_safe, *type(stage).untracked)
        unsafe = [k for k in keys if not any(k == s or k.startswith(f"{s}.") for s in safe)]
        if unsafe:
            return f"config changed ({', '.join(unsafe)})"
        if inputs:
            return f"input changed ({', '.join(inputs)})"
        if upstream:
            return f"upstream '{upstream[0]}' output changed"
        if status not in ("done", "interrupted"):
            return f"{status} last time"
        if not type(stage).resumable:
            return "interrupted"
        if not stage.ctx.out_dir.is_dir():
            return f"{status}, and its output folder is gone"
        return stage.resume_blocker()

    # ---- running --------------------------------------------------------------------------------
    def run(self, sel: Selection | None = None, *, dry_run: bool = False) -> list[Decision]:
        """Plan and check (and unless `dry_run`, execute) the selected stages; raise on failure or interrupt.

        A run refused by the checks of its plan (`preflight`) has written nothing, not even its run directory.
        """
        sel = sel or Selection()
        selected = select(self.loaded.needs, sel)
        check_store_placement(self.loaded, self.run_dir)
        self.reporter.header(self.loaded, self.run_dir)
        warning = store_elsewhere_warning(self.loaded, self.run_dir)
        if warning:
            log.warning(warning)
        planned = _lock_text(self.run_dir)
        plan = self._walk(LockFile.load(self.run_dir), sel, selected, execute=False, report=dry_run)
        self.preflight(plan)
        if dry_run:
            return plan
        if self.rank > 0:
            self._tree_hashes.clear()  # rank 0 may be running stages meanwhile
            return self._walk(LockFile.load(self.run_dir), sel, selected, execute=True)
        with RunLock(self.run_dir) as run_lock:
            if _lock_text(self.run_dir) != planned:  # another run finished stages since the plan
                self._tree_hashes.clear()
            if run_lock.took_over:
                log.warning(
                    "took over a stale run lock left by pid %s (no longer running)", run_lock.took_over.get("pid")
                )
            lock = LockFile.load(self.run_dir)
            for name, record in lock.stages.items():  # its lock was removed by `unlock --force`
                if record.status == "running" and alive_here(record.host, record.pid, record.started):
                    raise _busy_error(self.run_dir, name, record.pid)
            write_atomic(self.run_dir / "resolved.yaml", dump_yaml(self.loaded.data))
            write_command(self.run_dir, self.loaded.path, self.loaded.overrides)
            with StopOnSignal(self.stop_event) as stopper:
                self._stopper = stopper
                try:
                    return self._walk(lock, sel, selected, execute=True)
                finally:
                    self.reporter.summary(self.decisions, lock)

    def preflight(self, plan: list[Decision]) -> None:
        """Refuse the run before any stage starts when a stage that would run is known to fail: its env ids, env
        spaces against the data, options the data or the installed packages cannot serve (`Stage.preflight`);
        every problem at once."""
        checks = Preflight(self.loaded.config, topological_order(self.loaded.needs))
        for d in plan:
            if d.action in ("run", "resume"):
                stage = self._stage(d.name, self._context(d.name))
                with checks.collecting():
                    checks.check_ids(stage.config, f"stages.{d.name}")
                    stage.preflight(checks)
        raise_all(checks.errors)

    def _walk(
        self, lock: LockFile, sel: Selection, selected: set[str], *, execute: bool, report: bool = True
    ) -> list[Decision]:
        rerun: set[str] = set()
        self.run_id = lock.run_id
        decisions = self.decisions = []
        for name in topological_order(self.loaded.needs):
            d = self.decide(name, lock, sel, rerun, selected)
            decisions.append(d)
            if report:
                self.reporter.decision(d)
            if d.action == "busy" and execute:
                raise _busy_error(self.run_dir, name, d.record.pid)
            if d.action in ("run", "resume", "busy"):
                rerun.add(name)
                if execute:
                    if self.stop_event.is_set():
                        raise Interrupted(f"stopped before stage '{name}'", signum=self.signum or 2)
                    self._execute(name, d, lock)
        return decisions

    def _execute(self, name: str, d: Decision, lock: LockFile) -> None:
        resume = d.action == "resume"
        ctx = self._context(name, resume=resume)
        if self.rank > 0:  # a secondary process of a multi-process launch: rank 0 keeps the books
            stage = self._stage(name, ctx)
            if type(stage).distributed:
                stage.run()
            return
        if not resume and d.move_to is not None and ctx.out_dir.exists():
            d.move_to.parent.mkdir(parents=True, exist_ok=True)
            os.replace(ctx.out_dir, d.move_to)
            log.info("moved the old outputs of stage '%s' to %s", name, d.move_to)
        elif not resume and ctx.out_dir.exists():
            shutil.rmtree(ctx.out_dir)
        self._tree_hashes.pop(name, None)
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        stage = self._stage(name, ctx)
        record = d.record
        if not record.fingerprint:  # decided without computing inputs (forced / upstream re-run)
            record.input_hashes = stage.input_fingerprints()
            record.upstream = {dep: lock.record(dep).output_hash for dep in self.loaded.needs[name]}
            record.fingerprint = hash_json([record.config_hash, record.input_hashes, record.upstream])
        record.status, record.started, record.ended = "running", time.time(), None
        record.pid, record.host, record.error, record.metrics = os.getpid(), socket.gethostname(), "", {}
        lock.stages[name] = record
        lock.save()
        self.reporter.stage_started(name)
        handler = logging.FileHandler(ctx.out_dir / STAGE_LOG)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger("amago_pipe").addHandler(handler)
        try:
            ctx.log.info("stage %s started (%s: %s)", name, d.action, d.reason)
            metrics = stage.run() or {}
            record.output_hash = self.output_hash(stage)
            record.metrics = to_dict(metrics)
            record.status = "done"
        except (Interrupted, KeyboardInterrupt) as e:
            record.status = "interrupted"
            signum = self.signum or getattr(e, "exit_code", 130) - 128
            raise Interrupted(
                f"stage '{name}' interrupted; run again to {'resume' if stage.resumable else 're-run'} it",
                signum=signum,
            ) from e
        except AmagoPipeError as e:
            record.status, record.error = "failed", str(e)
            ctx.log.error("stage failed: %s", e)
            failed = StageFailed(f"stage '{name}' failed: {e}")
            failed.exit_code = e.exit_code
            raise failed from e
        except Exception as e:
            record.status, record.error = "failed", f"{type(e).__name__}: {e}"
            if out_of_space(e) is None:
                ctx.log.exception("stage crashed")
            else:  # a full disk is the user's to fix, not a bug: no traceback (the CLI exits 3)
                ctx.log.error("stage failed: %s", e)
            raise StageFailed(
                f"stage '{name}' crashed: {type(e).__name__}: {e}\n"
                f"full traceback in {ctx.out_dir / STAGE_LOG} (or run with --debug)"
            ) from e
        finally:
            record.ended = time.time()
            lock.save()
            logging.getLogger("amago_pipe").removeHandler(handler)
            handler.close()
            self.reporter.stage_finished(name, record)


def _shown_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Changed keys of two `stage_config`s as a user writes them: `logging.log_interval`, `pipeline seed`."""
    return [k.removeprefix("stage.") if k.startswith("stage.") else f"pipeline {k}" for k in changed_keys(old, new)]


def _lock_text(run_dir: Path) -> str:
    """The lock file's text ('' when absent): whether another run recorded stages since a plan."""
    try:
        return (run_dir / LOCK_FILE).read_text()
    except OSError:
        return ""


def _busy_error(run_dir: Path, name: str, pid: int | None) -> LockError:
    return LockError(
        f"stage '{name}' of {run_dir} is still being run by pid {pid} on this host (its run lock was removed); "
        f"wait for it to finish or stop it (kill {pid}), then run again"
    )
