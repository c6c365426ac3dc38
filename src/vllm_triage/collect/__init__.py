"""collect: freeze the evidence of a failed start once, redacted, into one bundle."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.collect.api import CollectResult, collect
    from vllm_triage.collect.probes import CollectOptions

__all__ = ["CollectOptions", "CollectResult", "collect"]
__getattr__ = lazy_exports(
    __name__,
    {
        "CollectOptions": "vllm_triage.collect.probes",
        "CollectResult": "vllm_triage.collect.api",
        "collect": "vllm_triage.collect.api",
    },
)
