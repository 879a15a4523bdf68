"""Stage ordering and selection (`--from`, `--until`, `--only`) over the `needs` graph."""

from __future__ import annotations

from dataclasses import dataclass

from amago_pipe.errors import ConfigError, did_you_mean

FORCE_ALL = "*"


@dataclass(frozen=True)
class Selection:
    """Which stages a run considers and which it forces."""

    from_: str | None = None
    until: str | None = None
    only: str | None = None
    force: str | None = None
    """None, FORCE_ALL ('*') for every selected stage, or one stage name."""


def topological_order(needs: dict[str, list[str]]) -> list[str]:
    """Stages in an order where each comes after what it needs (file order breaks ties)."""
    done: list[str] = []
    pending = list(needs)
    while pending:
        for name in pending:
            if all(d in done for d in needs[name]):
                done.append(name)
                pending.remove(name)
                break
        else:  # pragma: no cover - cycles are rejected when the config is loaded
            raise ConfigError(f"dependency cycle among stages {pending}")
    return done


def descendants(needs: dict[str, list[str]], name: str) -> set[str]:
    """Every stage that needs `name`, directly or through others."""
    out: set[str] = set()
    frontier = [name]
    while frontier:
        current = frontier.pop()
        for stage, deps in needs.items():
            if current in deps and stage not in out:
                out.add(stage)
                frontier.append(stage)
    return out


def ancestors(needs: dict[str, list[str]], name: str) -> set[str]:
    """Every stage `name` needs, directly or through others."""
    out: set[str] = set()
    frontier = [name]
    while frontier:
        for dep in needs[frontier.pop()]:
            if dep not in out:
                out.add(dep)
                frontier.append(dep)
    return out


def select(needs: dict[str, list[str]], sel: Selection) -> set[str]:
    """The stages a run considers; unknown names raise ConfigError with a did-you-mean."""
    names = list(needs)
    for option, value in (("--from", sel.from_), ("--until", sel.until), ("--only", sel.only), ("--force", sel.force)):
        if value is not None and value != FORCE_ALL and value not in needs:
            raise ConfigError(
                f"{option} {value}: no stage named '{value}' (stages: {', '.join(names)}){did_you_mean(value, names)}"
            )
    if sel.only and (sel.from_ or sel.until):
        raise ConfigError("--only cannot be combined with --from or --until")
    if sel.only:
        return {sel.only}
    chosen = set(names)
    if sel.from_:
        chosen &= {sel.from_} | descendants(needs, sel.from_)
    if sel.until:
        chosen &= {sel.until} | ancestors(needs, sel.until)
    if not chosen:
        raise ConfigError(f"--from {sel.from_} and --until {sel.until} select no stage")
    return chosen
