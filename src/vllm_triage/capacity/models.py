"""The artifact of `capacity`: will the model fit the GPUs as the launch configures them.

The top-level fields schema_version, verdict, weights_bytes_per_gpu, kv_bytes_per_token,
kv_tokens, max_concurrency_at_max_model_len and assumptions are a contract that users' scripts and
preflight read; fields may be added, never renamed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vllm_triage.models import SCHEMA_VERSION, Artifact

CapacityVerdict = Literal["fits", "tight", "does_not_fit"]

ESTIMATE_NOTE = (
    "An estimate from the model's config and the GPUs' nominal memory, not a measurement: vLLM "
    "profiles the real peak at start-up and its own 'GPU KV cache size' line is the final word."
)


class Change(Artifact):
    """A flag (or a hardware change) that moves the verdict, with what it gives."""

    flag: str = Field(description="e.g. --max-model-len, --kv-cache-dtype, --gpu-count")
    value: str
    effect: str = Field(description="the figures with the change, in words")


class ParallelSizes(Artifact):
    tensor: int
    pipeline: int
    data: int
    decode_context: int = 1
    expert_parallel: bool = False


class CapacityEstimate(Artifact):
    """Weights per GPU, KV-cache bytes per token, the KV tokens left, and the verdict."""

    schema_version: int = SCHEMA_VERSION
    verdict: CapacityVerdict
    summary: str = Field(description="the verdict in one sentence, with its figures")
    estimate_note: str = ESTIMATE_NOTE
    model: str = Field(description="the config.json read")
    model_type: str
    architecture: str
    attention: str = Field(description="the attention kinds and their layer counts, e.g. 'mla 61'")
    parameters: int = Field(description="parameters vLLM loads (from the config)")
    dtype: str = Field(description="the dtype the weights are served in")
    quantization: str | None
    kv_cache_dtype: str = Field(description="as given (auto: the model's dtype)")
    kv_cache_dtype_bytes: float
    device: str = Field(description="the GPU (or the CPU backend) the figures are for")
    gpu_count: int = Field(description="GPUs there are (or the launch uses, when not given)")
    gpus_needed: int = Field(description="tensor x pipeline x data parallel sizes")
    gpu_memory_bytes: int | None = Field(description="usable memory of one GPU, as vLLM sees it")
    gpu_memory_utilization: float
    parallel: ParallelSizes
    max_model_len: int
    model_max_len: int | None = Field(description="the longest context the config allows")
    concurrency: int = Field(description="the requests at max_model_len the verdict is for")
    weights_bytes_total: int = Field(description="weights vLLM loads, all GPUs of one replica")
    weights_source: str = Field(description="where the weights' size comes from")
    weights_bytes_per_gpu: int = Field(description="on the fullest GPU")
    reserve_bytes_per_gpu: int = Field(
        description="activation peak, CUDA graphs, CUDA context and NCCL buffers (estimated)"
    )
    kv_memory_bytes_per_gpu: int = Field(
        description="what is left for the KV cache on the fullest GPU (negative: weights do not fit)"
    )
    kv_bytes_per_token: int = Field(
        description="one token's KV cache summed over the GPUs of one replica (replicated heads "
        "and MLA latents counted on every GPU that holds them), in the KV cache's dtype"
    )
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_token_full_layers: int = Field(
        description="the part that keeps growing past sliding windows (full attention and MLA)"
    )
    fixed_bytes_per_request: int = Field(
        description="per request, whatever its length: linear-attention state, all GPUs"
    )
    kv_tokens: int | None = Field(
        description="KV-cache tokens of one replica, as vLLM's 'GPU KV cache size' counts them "
        "(none when no layer keeps per-token KV)"
    )
    max_concurrency_at_max_model_len: float = Field(
        description="requests of max_model_len tokens the cache holds at once, all replicas"
    )
    max_context_at_concurrency: int = Field(
        description="the longest context each of `concurrency` requests can have at once "
        "(capped at the model's own maximum)"
    )
    reasons: list[str] = Field(default_factory=list, description="why the verdict, with figures")
    changes: list[Change] = Field(
        default_factory=list, description="flags or hardware that would change the verdict"
    )
    assumptions: list[str] = Field(default_factory=list)
