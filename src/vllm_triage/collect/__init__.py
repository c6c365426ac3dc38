"""collect: freeze the evidence of a failed start once, redacted, into one bundle."""

from vllm_triage.collect.api import CollectResult, collect
from vllm_triage.collect.probes import CollectOptions

__all__ = ["CollectOptions", "CollectResult", "collect"]
