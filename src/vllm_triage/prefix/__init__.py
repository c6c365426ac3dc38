"""prefix-check: why a sample of requests would not share the prefix cache (no server needed)."""

from vllm_triage.prefix.check import prefix_check

__all__ = ["prefix_check"]
