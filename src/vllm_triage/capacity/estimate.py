"""The arithmetic of capacity, pure: a model's layers in bytes, spread over the GPUs of a parallel
layout, against the memory each GPU has, gives the weights per GPU, the KV bytes per token, the KV
tokens left, and how many requests of a length fit.

How vLLM spreads a model, which the figures follow:
- tensor parallelism splits attention heads, MLPs, experts, embeddings and lm_head across its
  ranks; KV heads too, but never below one per rank (fewer KV heads than ranks: replicated);
  MLA's latent and its down-projections are whole on every rank;
- pipeline parallelism gives each stage a run of layers (vLLM's get_pp_indices: the remainder
  goes to the stages before the last), the embeddings to the first, lm_head to the last; the
  engine takes the smallest KV cache of its stages;
- expert parallelism spreads whole experts over tensor x data parallel ranks;
- decode context parallelism spreads each request's tokens over that many of the TP ranks
  (vLLM multiplies its KV token count by it);
- data parallelism runs independent replicas, each with its own KV cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_triage.capacity.shapes import Layer


@dataclass(frozen=True)
class LayerBytes:
    """One layer's weights in memory (or the model's ends), by how they spread: split across TP
    ranks, the experts (TP, or the expert-parallel group), and whole on every rank."""

    split: float = 0.0
    experts: float = 0.0
    whole: float = 0.0

    @property
    def total(self) -> float:
        return self.split + self.experts + self.whole


@dataclass(frozen=True)
class Layout:
    """A parallel layout and the memory it runs in."""

    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    decode_context: int = 1
    expert_parallel: bool = False
    gpu_bytes: int | None = None  # usable memory of one GPU, as vLLM sees it (None: CPU backend)
    utilization: float = 0.9
    reserve: int = 0  # per GPU, outside weights and KV cache
    kv_memory: int | None = None  # the KV cache per GPU when given (--kv-cache-memory-bytes)

    @property
    def gpus(self) -> int:
        return self.tensor * self.pipeline * self.data


@dataclass(frozen=True)
class Model:
    """A model in bytes: its layers' KV widths and weights, and the weights at its two ends."""

    layers: tuple[Layer, ...]
    layer_bytes: tuple[LayerBytes, ...]
    embed_bytes: float
    lm_head_bytes: float
    tied: bool
    kv_element_bytes: float
    state_element_bytes: float
    mla_bytes_per_layer: int | None = None  # fixed MLA entry size (fp8_ds_mla), else None


@dataclass(frozen=True)
class Stage:
    """One pipeline stage as one of its GPUs sees it."""

    layers: range
    weights: float
    per_token: float  # KV bytes per token, every layer that keeps the token
    full_per_token: float  # the part of per_token from layers without a window
    windows: tuple[tuple[float, int], ...]  # (bytes per token, window) of sliding layers
    state: float  # fixed bytes per request
    available: float  # KV memory

    def request_bytes(self, tokens: int) -> float:
        """The memory one request of `tokens` tokens holds on this GPU."""
        return (
            tokens * self.full_per_token
            + sum(rate * min(tokens, window) for rate, window in self.windows)
            + self.state
        )


@dataclass(frozen=True)
class Figures:
    """What a layout gives: per GPU, per replica and for the whole deployment."""

    stages: tuple[Stage, ...]
    layout: Layout

    @property
    def weights_per_gpu(self) -> float:
        return max(stage.weights for stage in self.stages)

    @property
    def weights_total(self) -> float:
        """The weights of one replica, summed over its GPUs."""
        return sum(stage.weights for stage in self.stages) * self.layout.tensor

    @property
    def available(self) -> float:
        """The KV memory of the fullest GPU (negative when the weights alone do not fit)."""
        return min(stage.available for stage in self.stages)

    @property
    def limiting(self) -> Stage:
        """The stage whose KV cache runs out first (vLLM takes the smallest)."""
        holding = [stage for stage in self.stages if stage.per_token > 0]
        if not holding:
            return min(self.stages, key=lambda stage: stage.available)
        return min(holding, key=lambda stage: stage.available / stage.per_token)

    @property
    def per_token_per_gpu(self) -> float:
        return self.limiting.per_token

    @property
    def per_token_total(self) -> float:
        return sum(stage.per_token for stage in self.stages) * self.layout.tensor

    @property
    def full_per_token_total(self) -> float:
        return sum(stage.full_per_token for stage in self.stages) * self.layout.tensor

    @property
    def state_total(self) -> float:
        return sum(stage.state for stage in self.stages) * self.layout.tensor

    @property
    def kv_tokens(self) -> int | None:
        """Token slots of one replica's KV cache at the full per-token rate (none: no layer keeps
        per-token KV)."""
        holding = [stage for stage in self.stages if stage.per_token > 0]
        if not holding:
            return None
        return max(0, math.floor(min(s.available / s.per_token for s in holding)))

    def concurrency(self, tokens: int) -> float:
        """Requests of `tokens` tokens one replica's cache holds at once."""
        ratios = []
        for stage in self.stages:
            need = stage.request_bytes(tokens)
            if need > 0:
                ratios.append(max(0.0, stage.available) / need)
        return min(ratios) if ratios else math.inf

    def max_context(self, requests: int, cap: int) -> int:
        """The longest context (at most `cap`) each of `requests` requests of one replica can
        have at once; 0 when not even one token fits."""
        if self.concurrency(1) < requests:
            return 0
        if self.concurrency(cap) >= requests:
            return cap
        low, high = 1, cap  # concurrency(low) >= requests > concurrency(high)
        while high - low > 1:
            middle = (low + high) // 2
            if self.concurrency(middle) >= requests:
                low = middle
            else:
                high = middle
        return low


def pp_partition(layers: int, stages: int) -> list[range]:
    """The layers of each pipeline stage, as vLLM's get_pp_indices splits them."""
    sizes = [layers // stages] * stages
    for i in range(2, layers % stages + 2):
        sizes[-i] += 1
    ranges, start = [], 0
    for size in sizes:
        ranges.append(range(start, start + size))
        start += size
    return ranges


def _kv_per_gpu(model: Model, layer: Layer, layout: Layout) -> tuple[float, float]:
    """(KV bytes per token, fixed state bytes per request) of one layer on one GPU."""
    if layer.attention == "linear":
        return 0.0, layer.state * model.state_element_bytes / layout.tensor
    if layer.attention == "mla":
        per_layer = (
            model.mla_bytes_per_layer
            if model.mla_bytes_per_layer is not None
            else layer.kv_width * model.kv_element_bytes
        )
        return per_layer / layout.decode_context, 0.0
    heads = max(1, layer.kv_heads // layout.tensor)
    width = layer.kv_width * heads / layer.kv_heads
    return width * model.kv_element_bytes / layout.decode_context, 0.0


def figures(model: Model, layout: Layout) -> Figures:
    """Weights and KV cache of every pipeline stage on one of its GPUs, for this layout."""
    expert_group = layout.tensor * (layout.data if layout.expert_parallel else 1)
    stages = []
    parts = pp_partition(len(model.layers), layout.pipeline)
    for number, layers in enumerate(parts):
        weights = 0.0
        per_token = full = state = 0.0
        windows: list[tuple[float, int]] = []
        for index in layers:
            layer, size = model.layers[index], model.layer_bytes[index]
            weights += size.split / layout.tensor + size.experts / expert_group + size.whole
            rate, fixed = _kv_per_gpu(model, layer, layout)
            per_token += rate
            state += fixed
            if layer.attention == "sliding" and layer.window is not None:
                windows.append((rate, layer.window))
            else:
                full += rate
        if number == 0:
            weights += model.embed_bytes / layout.tensor
        if number == len(parts) - 1:
            head = model.lm_head_bytes
            if model.tied and layout.pipeline > 1:
                head = model.embed_bytes  # the last stage holds its own copy of the tied matrix
            weights += head / layout.tensor
        if layout.kv_memory is not None:
            available = float(layout.kv_memory)
        elif layout.gpu_bytes is not None:
            available = layout.gpu_bytes * layout.utilization - weights - layout.reserve
        else:
            available = 0.0
        stages.append(Stage(layers, weights, per_token, full, tuple(windows), state, available))
    return Figures(tuple(stages), layout)


def scale_bytes(sizes: Sequence[LayerBytes], factor: float) -> tuple[LayerBytes, ...]:
    return tuple(
        LayerBytes(size.split * factor, size.experts * factor, size.whole * factor)
        for size in sizes
    )
