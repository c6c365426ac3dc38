"""Plan: the recovery path under the team's constraints, and the change plan (`vllm-triage plan`)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.plan.api import Ask, PlanOptions, plan
    from vllm_triage.plan.models import Plan

__all__ = ["Ask", "Plan", "PlanOptions", "plan"]
__getattr__ = lazy_exports(
    __name__,
    {
        "Ask": "vllm_triage.plan.api",
        "Plan": "vllm_triage.plan.models",
        "PlanOptions": "vllm_triage.plan.api",
        "plan": "vllm_triage.plan.api",
    },
)
