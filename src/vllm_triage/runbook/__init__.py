"""The runbook over a case: what the case holds, and the next step for it (`case show`)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.runbook.models import CaseSummary
    from vllm_triage.runbook.show import CaseShowOptions, case_show

__all__ = ["CaseShowOptions", "CaseSummary", "case_show"]
__getattr__ = lazy_exports(
    __name__,
    {
        "CaseShowOptions": "vllm_triage.runbook.show",
        "CaseSummary": "vllm_triage.runbook.models",
        "case_show": "vllm_triage.runbook.show",
    },
)
