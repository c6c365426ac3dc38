"""prefix-check: why a sample of requests would not share the prefix cache (no server needed)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.prefix.check import prefix_check

__all__ = ["prefix_check"]
__getattr__ = lazy_exports(__name__, {"prefix_check": "vllm_triage.prefix.check"})
