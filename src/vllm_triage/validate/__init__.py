"""validate: prove a running server works, rung by rung."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.validate.context import ValidateOptions
    from vllm_triage.validate.ladder import ValidateResult, ValidationInterrupted, validate

__all__ = ["ValidateOptions", "ValidateResult", "ValidationInterrupted", "validate"]
__getattr__ = lazy_exports(
    __name__,
    {
        "ValidateOptions": "vllm_triage.validate.context",
        "ValidateResult": "vllm_triage.validate.ladder",
        "ValidationInterrupted": "vllm_triage.validate.ladder",
        "validate": "vllm_triage.validate.ladder",
    },
)
