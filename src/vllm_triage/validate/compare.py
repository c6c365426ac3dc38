"""Two runs of the same ladder side by side (`validate --compare-endpoint URL`): rung by rung,
whether both passed, and each figure from both endpoints, so a later record can say how the
isolated environment and the upgraded node compare on the same input set."""

from __future__ import annotations

from typing import Any

from vllm_triage.validate.models import (
    RUNG_ORDER,
    EndpointComparison,
    RungComparison,
    RungResult,
    ValidationRun,
)

# The compared side's records go into this sub-folder of the run folder.
COMPARE_FOLDER = "compare"
# Figures compared per rung at most (nested ones flattened to dotted names).
_MAX_FIGURES = 64
_SCALARS = (str, int, float, bool)


def _flat(figures: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalar figures, nested objects as dotted names (concurrency levels: `levels.4.errors`);
    lists (per-request details) left out: they are in each side's own summary."""
    flat: dict[str, Any] = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flat(value, name + "."))
        elif value is None or isinstance(value, _SCALARS):
            flat[name] = value
    return flat


def _rung(name: str, this: RungResult | None, other: RungResult | None) -> RungComparison:
    mine = _flat(this.figures) if this else {}
    theirs = _flat(other.figures) if other else {}
    names = [*mine, *(k for k in theirs if k not in mine)][:_MAX_FIGURES]
    return RungComparison.model_validate(
        {
            "name": name,
            "this": this.status if this else None,
            "other": other.status if other else None,
            "both_passed": bool(this and other and this.status == other.status == "passed"),
            "same_status": bool(this and other and this.status == other.status),
            "figures": {key: [mine.get(key), theirs.get(key)] for key in names},
        }
    )


def compare_runs(this: ValidationRun, other: ValidationRun) -> EndpointComparison:
    """`other` (the second endpoint's run) against `this`, rung by rung in ladder order."""
    mine = {r.name: r for r in this.rungs}
    theirs = {r.name: r for r in other.rungs}
    rungs = [
        _rung(name, mine.get(name), theirs.get(name))
        for name in RUNG_ORDER
        if name in mine or name in theirs
    ]
    return EndpointComparison(
        url=other.url,
        model=other.model,
        passed=other.passed,
        both_passed=this.passed and other.passed,
        rungs=rungs,
        records=other.records,
        run=other,
    )
