"""prefix-check: why a sample of requests would not share the prefix cache (no server needed)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.prefix.check import PrefixCheckOptions, prefix_check

__all__ = ["PrefixCheckOptions", "prefix_check"]
__getattr__ = lazy_exports(__name__, {name: "vllm_triage.prefix.check" for name in __all__})
