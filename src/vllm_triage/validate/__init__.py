"""validate: prove a running server works, rung by rung; and why requests would not share the prefix cache."""

from vllm_triage.validate.context import ValidateOptions
from vllm_triage.validate.ladder import ValidateResult, ValidationInterrupted, validate

__all__ = ["ValidateOptions", "ValidateResult", "ValidationInterrupted", "validate"]
