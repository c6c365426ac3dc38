"""The case's offline HTML page (and PDF) for approvers: `vllm-triage report`."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.report.api import ReportOptions, ReportResult, report

__all__ = ["ReportOptions", "ReportResult", "report"]
__getattr__ = lazy_exports(
    __name__,
    {
        "ReportOptions": "vllm_triage.report.api",
        "ReportResult": "vllm_triage.report.api",
        "report": "vllm_triage.report.api",
    },
)
