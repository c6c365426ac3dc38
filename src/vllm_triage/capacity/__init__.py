"""capacity: will the model fit the GPUs as the launch configures them (weights per GPU, KV-cache
bytes per token, KV tokens left, the requests of max_model_len that fit), from its config alone."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.capacity.api import CapacityOptions, capacity
    from vllm_triage.capacity.models import CapacityEstimate

__all__ = ["CapacityEstimate", "CapacityOptions", "capacity"]
__getattr__ = lazy_exports(
    __name__,
    {
        "CapacityOptions": "vllm_triage.capacity.api",
        "capacity": "vllm_triage.capacity.api",
        "CapacityEstimate": "vllm_triage.capacity.models",
    },
)
