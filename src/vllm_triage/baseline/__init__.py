"""baseline: capture a node's state before a change and compare it after (the driver moved as
planned; nothing else a driver change can disturb did)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.baseline.capture import CaptureOptions, baseline_capture
    from vllm_triage.baseline.compare import CompareOptions, baseline_compare, replaces_current
    from vllm_triage.baseline.models import Baseline, BaselineComparison

__all__ = [
    "Baseline",
    "BaselineComparison",
    "CaptureOptions",
    "CompareOptions",
    "baseline_capture",
    "baseline_compare",
    "replaces_current",
]
__getattr__ = lazy_exports(
    __name__,
    {
        "Baseline": "vllm_triage.baseline.models",
        "BaselineComparison": "vllm_triage.baseline.models",
        "CaptureOptions": "vllm_triage.baseline.capture",
        "CompareOptions": "vllm_triage.baseline.compare",
        "baseline_capture": "vllm_triage.baseline.capture",
        "baseline_compare": "vllm_triage.baseline.compare",
        "replaces_current": "vllm_triage.baseline.compare",
    },
)
