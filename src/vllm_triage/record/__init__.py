"""record: the decision record after the observation period (`vllm-triage record`), and the check
of its re-evaluation triggers (`vllm-triage record check`)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.record.api import Ask, RecordOptions, record
    from vllm_triage.record.check import RecordCheckOptions, record_check
    from vllm_triage.record.models import DecisionRecord, RecordReview

__all__ = [
    "Ask",
    "DecisionRecord",
    "RecordCheckOptions",
    "RecordOptions",
    "RecordReview",
    "record",
    "record_check",
]
__getattr__ = lazy_exports(
    __name__,
    {
        "Ask": "vllm_triage.record.api",
        "DecisionRecord": "vllm_triage.record.models",
        "RecordCheckOptions": "vllm_triage.record.check",
        "RecordOptions": "vllm_triage.record.api",
        "RecordReview": "vllm_triage.record.models",
        "record": "vllm_triage.record.api",
        "record_check": "vllm_triage.record.check",
    },
)
