"""The words every layer shares: failure classes, phases of a start, the facts a log states.

They are typing-only names (Literal aliases) and constants, kept apart from the artifacts' models
(vllm_triage.models, pydantic) so that the knowledge base (msgspec) can name them without
importing pydantic: `compat` loads the knowledge base on every pod start. vllm_triage.models
imports them from here, so they stay importable from either module.
"""

from __future__ import annotations

from typing import Literal

FailureClass = Literal[
    "driver_too_old",
    "unsupported_gpu_arch",
    "driver_library_mismatch",
    "compat_lib_error",
    "no_gpu_visible",
    "oom_at_load",
    "kv_cache_insufficient",
    "oom_under_load",
    "model_path_or_access",
    "nccl_or_network",
    "shm_insufficient",
    "chat_template",
    "tool_call_parser",
    "model_arch_unsupported",
    "dependency_mismatch",
    "bad_cli_argument",
    "fabric_manager_missing",
    "host_memory",
    "cache_dir_not_writable",
    "no_failure",
    "unknown",
]

Phase = Literal["before_weights", "during_load", "after_start", "unknown"]
PHASE_ORDER: tuple[Phase, ...] = ("before_weights", "during_load", "after_start")

# What a log says about its own stack (diagnose reads these lines and cites where).
FactKey = Literal[
    "driver_version",
    "driver_cuda",
    "torch_cuda",
    "image_cuda",
    "image_require",
    # the driver release a container was built for (an NGC image's start banner)
    "driver_need",
    "vllm_version",
    "gpu",
    "compute_capability",
    "kernel_module",
]
