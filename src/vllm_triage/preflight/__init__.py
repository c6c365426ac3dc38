"""preflight: refuse a start that cannot work before it starts (the image's CUDA against the
driver, the GPU's architecture, the GPUs the container runtime exposes, /dev/shm, the model's
files for the container's user, capacity, the recipe's version and flags)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.preflight.api import PreflightOptions, preflight
    from vllm_triage.preflight.models import PreflightCheck, PreflightResult

__all__ = ["PreflightCheck", "PreflightOptions", "PreflightResult", "preflight"]
__getattr__ = lazy_exports(
    __name__,
    {
        "PreflightOptions": "vllm_triage.preflight.api",
        "preflight": "vllm_triage.preflight.api",
        "PreflightCheck": "vllm_triage.preflight.models",
        "PreflightResult": "vllm_triage.preflight.models",
    },
)
