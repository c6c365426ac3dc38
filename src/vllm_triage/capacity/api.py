"""`capacity`: will the model fit the GPUs as the launch configures them, before a start that
would end in an out-of-memory error while loading, or in vLLM's "KV cache is needed, which is
larger than the available KV cache memory".

One library function, `capacity(CapacityOptions) -> CapacityEstimate`, that the command line and
preflight call. It reads the model's config.json (and the weights' total size where the folder
says it), the GPUs (flags, or a collect bundle's facts), and the launch (a command, or flags), and
works out: the weights per GPU, the KV-cache bytes per token for the attention the config
describes, the KV memory left after the weights and a reserve under --gpu-memory-utilization, the
KV tokens that makes, the requests of --max-model-len it holds, and the verdict with the flags that
would change it. Every figure is an estimate, and the artifact says so and what it assumed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vllm_triage.capacity.estimate import Figures, LayerBytes, Layout, Model, figures, scale_bytes
from vllm_triage.capacity.formats import Formats, Part, QuantFormat, load_formats
from vllm_triage.capacity.models import CapacityEstimate, CapacityVerdict, Change, ParallelSizes
from vllm_triage.capacity.shapes import (
    MAX_POSITIONS,
    MAX_TOTAL_BYTES,
    ModelShape,
    Params,
    read_model,
)
from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.schema import Gpu, gpu_name_key
from vllm_triage.launch import LaunchArgs, parse_launch_command

GIB = 1024**3
DEFAULT_UTILIZATION = 0.9  # vLLM's --gpu-memory-utilization default

RESERVE_FLOOR_BYTES = int(1.5 * GIB)
RESERVE_FRACTION = 0.05
"""The reserve per GPU besides weights and KV cache: max(RESERVE_FLOOR_BYTES, RESERVE_FRACTION of
the GPU's memory). vLLM subtracts from `utilization x memory`, besides the weights, the peak
activation memory of its profiling pass (max_num_batched_tokens tokens, the sampler's logits), the
CUDA graphs it captures, and memory outside torch (CUDA context, NCCL and custom all-reduce
buffers). Real logs (tests/data/models/kv_observations.csv, `utilization x memory - weights - KV`)
put it between 1.2 GiB (A100 80GB, gpt-oss-20b and an eager Gemma 4) and 2.4 GiB (RTX 3090,
Llama-3.1-8B, a 20k-token profile) up to about 7.5 GiB (H100, gpt-oss-120b, vllm#27508): a floor
for small GPUs and a share of the memory for large ones sits inside that spread."""

TIGHT_RESERVE_FACTOR = 2.0
"""`tight`: it fits with the reserve above, but not with twice that reserve (the real reserve
varies about that much between models and versions)."""
TIGHT_KV_MARGIN = 0.10
"""With the KV cache's size given outright (--kv-cache-memory-bytes, the CPU backend's
VLLM_CPU_KVCACHE_SPACE) there is no reserve to doubt: `tight` within 10% of the need."""

USABLE_FRACTION = 0.99
"""The memory torch reports for a GPU is about 1% below its nominal size (what the GPU table and
nvidia-smi give): 79.19 GiB on an 80 GB H100, 23.58 GiB on a 24 GB RTX 3090 (vllm#10517)."""

CPU_KVCACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"  # GiB of KV cache on vLLM's CPU backend
MAX_PARALLEL = 4096
MAX_CONCURRENCY = 1_000_000
MAX_GPU_COUNT = 100_000
SEARCH_TENSOR = (1, 2, 4, 8, 16)
SEARCH_PIPELINE = range(1, 17)
_EXCLUSION_KEYS = (
    "modules_to_not_convert",
    "ignore",
    "ignored_layers",
    "exclude_modules",
    "not_convert_modules",
    "modules_to_not_quantize",
)
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


@dataclass(frozen=True)
class CapacityOptions:
    """What to estimate.

    `model`: a model folder or its config.json. `weights_bytes`: the weights' total size in bytes
    (else model.safetensors.index.json, a bundle's model files, the *.safetensors files, or the
    config's parameter count). `gpu` / `gpu_count` / `gpu_memory_gib`: the GPUs (else a bundle's
    facts). `launch`: the vLLM launch command (text or parsed); the other fields override it.
    `kv_cache_memory_bytes`: the KV cache per GPU when it is given outright (vLLM's
    --kv-cache-memory-bytes; the CPU backend's VLLM_CPU_KVCACHE_SPACE is read from the launch's
    environment). `concurrency`: the requests of max_model_len tokens the verdict is for."""

    model: str | Path
    weights_bytes: int | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    gpu_memory_gib: float | None = None
    bundle: Path | None = None
    launch: str | LaunchArgs | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    decode_context_parallel_size: int | None = None
    enable_expert_parallel: bool | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    dtype: str | None = None
    kv_cache_memory_bytes: int | None = None
    reserve_bytes: int | None = None
    concurrency: int = 1


@dataclass
class _BundleFacts:
    gpu_name: str | None = None
    gpu_count: int | None = None
    gpu_memory_bytes: int | None = None
    launch: LaunchArgs | None = None
    weights_bytes: int | None = None
    where: str = ""


@dataclass(frozen=True)
class _Device:
    label: str
    memory: int | None  # usable bytes per GPU
    count: int | None


def _gib(value: float) -> str:
    return f"{value / GIB:,.1f} GiB"


def _check_range(name: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        raise InputError(f"{name} {value} is outside {low:g}..{high:g}")


# --- the launch ---------------------------------------------------------------------------------


def _other(launch: LaunchArgs | None, *flags: str) -> str | None:
    """A flag the launch table does not map (kept under `other`), by any of its names; vLLM reads
    --max_model_len as --max-model-len, so underscores count as hyphens."""
    if launch is None:
        return None
    found = {key.replace("_", "-"): value for key, value in launch.other.items()}
    for flag in flags:
        if flag in found:
            return found[flag]
    return None


def _as_int(flag: str, value: str | None) -> int | None:
    if value is None:
        return None
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?)\s*", value)
    if not match:
        raise InputError(f"launch command: {flag} {value!r} is not a number")
    factor = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2, "g": 1000**3, "G": 1024**3}
    return int(float(match.group(1)) * factor[match.group(2)])


def _as_switch(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() not in ("false", "0", "no")


def _parse_launch(launch: str | LaunchArgs | None, kb: KnowledgeBase) -> LaunchArgs | None:
    if launch is None or isinstance(launch, LaunchArgs):
        return launch
    return parse_launch_command(launch, kb)


# --- the bundle ---------------------------------------------------------------------------------


def _read_bundle(path: Path) -> _BundleFacts:
    """The GPUs, launch and model size a collect bundle recorded."""
    from vllm_triage.bundle.read import open_bundle

    with open_bundle(path) as bundle:
        facts = bundle.facts
        found = _BundleFacts(where=display_name(bundle.source))
        if facts.gpu is not None and facts.gpu.gpus:
            first = facts.gpu.gpus[0]
            found.gpu_name = first.name
            found.gpu_count = len(facts.gpu.gpus)
            if first.memory_total_mib:
                found.gpu_memory_bytes = first.memory_total_mib * 1024**2
        elif facts.kubernetes is not None and facts.kubernetes.gpu_product:
            found.gpu_name = facts.kubernetes.gpu_product
            found.gpu_count = facts.kubernetes.gpu_count
        if facts.vllm is not None:
            found.launch = facts.vllm.launch
        if facts.model_files is not None and facts.model_files.total_bytes:
            found.weights_bytes = facts.model_files.total_bytes
    return found


# --- the GPU ------------------------------------------------------------------------------------


def find_gpu(kb: KnowledgeBase, name: str) -> Gpu:
    """The GPU table's row for a name as people write it ("B200", "H100 80GB", "NVIDIA H100
    80GB HBM3", "NVIDIA-H100-80GB-HBM3-SHARED"); InputError when none or several match."""
    wanted = name.strip()
    for row in kb.gpus:
        if row.name.lower() == wanted.lower():
            return row
    for candidate in (wanted, f"NVIDIA {wanted}", f"NVIDIA GeForce {wanted}"):
        row_found = kb.gpu(candidate)
        if row_found is not None:
            return row_found
    key = gpu_name_key(wanted).lower()
    hits = [
        row
        for row in kb.gpus
        if key
        and (
            key in row.name.lower()
            or any(key in gpu_name_key(example).lower() for example in row.examples)
        )
    ]
    if len(hits) == 1:
        return hits[0]
    if hits:
        names = ", ".join(row.name for row in hits[:8])
        raise InputError(f"--gpu {wanted!r} matches several GPUs ({names}); name one of them")
    raise InputError(
        f"--gpu {wanted!r} is not in the GPU table; give its memory with --gpu-memory-gib"
    )


def _table_memory(row: Gpu, notes: list[str]) -> int:
    """A table row's memory in bytes: its nominal GB are GiB of HBM/GDDR (an 80 GB H100 shows
    81,559 MiB in nvidia-smi); a row that lists several sizes gives its first."""
    numbers = _NUMBER.findall(row.memory_gb)
    if not numbers:
        raise InputError(
            f"the GPU table gives no memory size for {row.name} ({row.memory_gb!r}); "
            "give it with --gpu-memory-gib"
        )
    if row.memory_gb.strip() != numbers[0]:
        notes.append(
            f"the GPU table gives {row.name}'s memory as {row.memory_gb!r}: {numbers[0]} GiB "
            "used (--gpu-memory-gib sets another)"
        )
    return int(float(numbers[0]) * GIB)


def _device(
    options: CapacityOptions, kb: KnowledgeBase, bundle: _BundleFacts, notes: list[str]
) -> _Device:
    name = options.gpu or bundle.gpu_name
    count = options.gpu_count or bundle.gpu_count
    if options.gpu_memory_gib is not None:
        _check_range("--gpu-memory-gib", options.gpu_memory_gib, 0.1, 100_000)
        label = name or f"a {options.gpu_memory_gib:g} GiB GPU"
        nominal = int(options.gpu_memory_gib * GIB)
        return _Device(label, int(nominal * USABLE_FRACTION), count)
    if options.gpu is None and bundle.gpu_memory_bytes:
        notes.append(f"GPUs from the bundle {bundle.where}: {count}x {name}")
        return _Device(name or "GPU", int(bundle.gpu_memory_bytes * USABLE_FRACTION), count)
    if name is None:
        return _Device("", None, count)
    row = find_gpu(kb, name)
    memory = _table_memory(row, notes)
    if bundle.gpu_name and options.gpu is None:
        notes.append(f"GPUs from the bundle {bundle.where}: {count}x {name}")
    return _Device(row.name, int(memory * USABLE_FRACTION), count)


# --- dtypes and quantisation ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Storage:
    """Bytes per parameter: the model's dtype, and the quantised parts' bytes."""

    dtype_bytes: float
    quant_bytes: float
    parts: frozenset[Part]
    label: str | None
    expert_factor: float = 1.0

    def layer(self, params: Params) -> LayerBytes:
        def size(count: int, part: Part) -> float:
            return count * (self.quant_bytes if part in self.parts else self.dtype_bytes)

        return LayerBytes(
            split=size(params.attention, "attention")
            + size(params.mlp, "mlp")
            + size(params.shared, "shared"),
            experts=size(params.experts, "experts")
            * (self.expert_factor if "experts" in self.parts else 1.0),
            whole=size(params.replicated, "attention")
            + (params.router + params.norms) * self.dtype_bytes,
        )


def _first_int(config: Mapping[str, Any], keys: Iterable[str]) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 2**20:
            return value
    return None


def _compressed_tensors(config: Mapping[str, Any]) -> tuple[float | None, int | None, int | None]:
    """(bits, group size, scale bits) of a compressed-tensors config's first weight group."""
    groups = config.get("config_groups")
    if not isinstance(groups, dict):
        return None, None, None
    for group in list(groups.values())[:16]:
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            continue
        bits = _first_int(weights, ("num_bits",))
        size = _first_int(weights, ("group_size",))
        fmt = str(config.get("format", ""))
        if "nvfp4" in fmt.lower() or (weights.get("type") == "float" and bits == 4):
            return 4, 16, 8
        if size is None or size <= 0:
            size = 16384  # per channel or per tensor: the scales are a rounding error
        return (float(bits) if bits and bits > 0 else None), size, None
    return None, None, None


def _storage(
    quant: Mapping[str, Any] | None,
    method: str | None,
    dtype_bytes: float,
    shape: ModelShape,
    formats: Formats,
    notes: list[str],
    *,
    loaded: bool,
) -> _Storage:
    """How the weights are stored: the checkpoint's quantization_config, or an online method."""
    if method is None:
        return _Storage(dtype_bytes, dtype_bytes, frozenset(), None)
    fmt: QuantFormat | None = formats.quant(method)
    config: Mapping[str, Any] = quant or {}
    if fmt is not None and fmt.by_algo:
        algo = next((str(config[k]) for k in fmt.algo_keys if k in config), None)
        target = fmt.by_algo.get(algo.upper()) if algo else None
        if target is not None:
            fmt = formats.quant(target) or fmt
    if fmt is None:
        notes.append(
            f"quantization {method[:40]!r} is not modelled: the weights are counted in the model's "
            "dtype (an over-estimate; --weights-bytes gives the real size)"
        )
        return _Storage(dtype_bytes, dtype_bytes, frozenset(), method[:40])
    bits: float | None = None
    group: int | None = _first_int(config, fmt.group_keys)
    scale_override: int | None = None
    if fmt.method == "compressed-tensors":
        bits, group, scale_override = _compressed_tensors(config)
    elif fmt.method == "bitsandbytes":
        bits = 8 if config.get("load_in_8bit") is True else 4
        group = shape.hidden if bits == 8 else None
    else:
        found = _first_int(config, fmt.bits_keys)
        bits = float(found) if found and found > 0 else None
    if group is not None and group <= 0:
        group = shape.hidden  # -1: one scale per output channel
    if scale_override is not None:
        fmt = fmt.model_copy(update={"scale_bits": scale_override})
    per_weight = fmt.bits_per_weight(bits, group) / 8
    parts = set(fmt.applies_to)
    for key in _EXCLUSION_KEYS:
        entries = config.get(key)
        if isinstance(entries, list):
            for entry in entries[:1000]:
                part = formats.excluded_part(str(entry)[:400]) if isinstance(entry, str) else None
                if part is not None:
                    parts.discard(part)
    label = fmt.method if fmt.method == method else f"{method[:40]} ({fmt.method})"
    factor = 1.0
    if loaded and shape.experts > 1 and "experts" in parts:
        factor = fmt.expert_padding(shape.hidden, shape.expert_width)
        if factor > 1.0001:
            notes.append(
                f"{fmt.method} experts counted {factor - 1:.1%} larger in memory than in the "
                "checkpoint: vLLM's kernels pad their sizes (inferred, see capacity/formats.yaml)"
            )
    return _Storage(dtype_bytes, per_weight, frozenset(parts), label, factor)


def _dtype_bytes(formats: Formats, name: str, what: str) -> int:
    value = formats.dtypes.get(name.lower())
    if value is None:
        raise InputError(
            f"{what} {name!r} is not a dtype vLLM serves in ({', '.join(formats.dtypes)})"
        )
    return value


# --- what-ifs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Case:
    """Everything one estimate depends on, so the what-ifs change one thing at a time."""

    model: Model
    layout: Layout
    max_len: int
    requests: int  # per replica
    cap: int  # the longest context the model allows

    def figures(self, reserve_factor: float = 1.0) -> Figures:
        layout = self.layout
        if reserve_factor != 1.0:
            layout = replace(layout, reserve=int(layout.reserve * reserve_factor))
        return figures(self.model, layout)

    def fits(self, reserve_factor: float = 1.0, margin: float = 1.0) -> bool:
        """Weights fit, and `requests` requests of max_len tokens fit in the KV cache (with the
        reserve times `reserve_factor`, the need times `margin`)."""
        result = self.figures(reserve_factor)
        if result.available <= 0:
            return False
        return result.concurrency(self.max_len) >= self.requests * margin

    def robust(self) -> bool:
        """Fits even with twice the reserve (or, with the KV cache given, with 10% to spare)."""
        if self.layout.kv_memory is not None:
            return self.fits(margin=1 + TIGHT_KV_MARGIN)
        return self.fits(TIGHT_RESERVE_FACTOR)


def _valid_tensor(shape: ModelShape, tensor: int) -> bool:
    """vLLM's rule: attention heads divisible by TP, KV heads divisible by it or it by them."""
    if shape.attention_heads % tensor:
        return False
    kv = shape.kv_heads
    return kv % tensor == 0 or tensor % kv == 0


def _longest(case: _Case, good: Callable[[_Case], bool]) -> int:
    """The longest max_model_len below the case's for which `good` holds (0: none)."""
    if not good(replace(case, max_len=1)):
        return 0
    low, high = 1, case.max_len  # good(low), not good(high)
    while high - low > 1:
        middle = (low + high) // 2
        if good(replace(case, max_len=middle)):
            low = middle
        else:
            high = middle
    return low


def _default_layout(shape: ModelShape, count: int) -> tuple[int, int]:
    """TP over the GPUs of one node (at most 8, a size vLLM allows for this model), pipeline
    parallel over the nodes."""
    tensor = max(
        t
        for t in SEARCH_TENSOR
        if t <= min(count, 8) and count % t == 0 and _valid_tensor(shape, t)
    )
    return tensor, min(max(1, count // tensor), len(shape.layers))


def _changes(
    case: _Case,
    shape: ModelShape,
    gpu_count: int,
    device: str,
    kv_dtype_bytes: float,
    good: Callable[[_Case], bool],
) -> list[Change]:
    """The flags that would make `good(case)` true, each alone, with the figures they give."""
    changes: list[Change] = []
    layout = case.layout
    current = case.figures()
    if current.available > 0:
        longest = _longest(case, good)
        shown = longest // 1024 * 1024 if longest >= 4096 else longest
        if shown >= 1:
            changes.append(
                Change(
                    flag="--max-model-len",
                    value=str(shown),
                    effect=f"{case.requests} request(s) of {shown:,} tokens fit at once",
                )
            )
    if kv_dtype_bytes > 1:
        model = replace(
            case.model,
            kv_element_bytes=1.0,
            mla_bytes_per_layer=None,
        )
        trial = replace(case, model=model)
        if good(trial):
            tokens = trial.figures().kv_tokens
            changes.append(
                Change(
                    flag="--kv-cache-dtype",
                    value="fp8",
                    effect=f"{tokens:,} KV tokens, "
                    f"{trial.figures().concurrency(case.max_len):.2f} requests of "
                    f"{case.max_len:,} tokens per replica (FP8 halves the KV cache; check the "
                    "model's quality with it)",
                )
            )
    if layout.kv_memory is None and layout.utilization < 0.95:
        trial = replace(case, layout=replace(layout, utilization=0.95))
        if good(trial):
            changes.append(
                Change(
                    flag="--gpu-memory-utilization",
                    value="0.95",
                    effect="fits, if nothing else uses the GPUs' memory",
                )
            )
    if layout.kv_memory is None:
        spare = [
            (t, p)
            for p in SEARCH_PIPELINE
            for t in SEARCH_TENSOR
            if (t, p) != (layout.tensor, layout.pipeline)
            and t >= layout.tensor
            and p >= layout.pipeline
            and p <= len(shape.layers)
            and t % layout.decode_context == 0
            and _valid_tensor(shape, t)
        ]
        spare.sort(key=lambda tp: (tp[0] * tp[1], tp[0] > 8, tp[1]))
        within = None
        beyond = None
        for tensor, pipeline in spare:
            trial = replace(case, layout=replace(layout, tensor=tensor, pipeline=pipeline))
            if not good(trial):
                continue
            needed = tensor * pipeline * layout.data
            if needed <= gpu_count and within is None:
                within = (tensor, pipeline)
            if needed > gpu_count and beyond is None:
                beyond = (tensor, pipeline)
            if within and beyond:
                break
        if within is not None:
            tensor, pipeline = within
            flag, value = (
                ("--tensor-parallel-size", str(tensor))
                if pipeline == layout.pipeline
                else ("--pipeline-parallel-size", str(pipeline))
            )
            changes.append(
                Change(
                    flag=flag,
                    value=value,
                    effect=f"TP {tensor} x PP {pipeline} on the {gpu_count} GPUs there are",
                )
            )
        if beyond is not None and within is None:
            tensor, pipeline = beyond
            needed = tensor * pipeline * layout.data
            changes.append(
                Change(
                    flag="--gpu-count",
                    value=str(needed),
                    effect=f"{needed}x {device} with --tensor-parallel-size {tensor}"
                    + (f" --pipeline-parallel-size {pipeline}" if pipeline > 1 else ""),
                )
            )
    return changes


# --- the estimate -------------------------------------------------------------------------------


def _attention_label(shape: ModelShape) -> str:
    names = {"full": "full", "sliding": "sliding-window", "mla": "MLA", "linear": "linear"}
    parts = []
    for kind, count in shape.kinds().items():
        label = names[kind]
        if kind == "full":
            if shape.kv_heads == 1:
                label = "MQA"
            elif shape.kv_heads < shape.attention_heads:
                label = f"GQA ({shape.kv_heads} KV heads)"
            else:
                label = "MHA"
        if kind == "sliding":
            window = next(layer.window for layer in shape.layers if layer.attention == kind)
            label = f"sliding-window {window}"
        parts.append(f"{label} x{count}")
    return ", ".join(parts)


@dataclass(frozen=True)
class _Settings:
    """The launch as capacity uses it: each value from a flag, else the launch command, else
    vLLM's default (None where it depends on the model or the GPUs)."""

    tensor: int | None
    pipeline: int | None
    data: int | None
    decode_context: int | None
    expert_parallel: bool
    max_len: int | None
    utilization: float
    kv_dtype: str
    quantization: str | None
    dtype: str | None
    kv_memory: int | None
    on_cpu: bool


def _settings(options: CapacityOptions, launch: LaunchArgs | None, notes: list[str]) -> _Settings:
    def pick(flag_value: int | None, field: int | None, *flags: str) -> int | None:
        if flag_value is not None:
            return flag_value
        if field is not None:
            return field
        return _as_int(flags[0], _other(launch, *flags))

    tensor = pick(
        options.tensor_parallel_size,
        launch.tensor_parallel_size if launch else None,
        "--tensor-parallel-size",
        "-tp",
    )
    pipeline = pick(
        options.pipeline_parallel_size,
        launch.pipeline_parallel_size if launch else None,
        "--pipeline-parallel-size",
        "-pp",
    )
    data = pick(
        options.data_parallel_size,
        launch.data_parallel_size if launch else None,
        "--data-parallel-size",
        "-dp",
    )
    decode_context = pick(
        options.decode_context_parallel_size, None, "--decode-context-parallel-size", "-dcp"
    )
    for name, value in (
        ("--tensor-parallel-size", tensor),
        ("--pipeline-parallel-size", pipeline),
        ("--data-parallel-size", data),
        ("--decode-context-parallel-size", decode_context),
    ):
        _check_range(name, value, 1, MAX_PARALLEL)
    expert_parallel = options.enable_expert_parallel
    if expert_parallel is None:
        expert_parallel = bool(_as_switch(_other(launch, "--enable-expert-parallel", "-ep")))
    max_len = pick(
        options.max_model_len, launch.max_model_len if launch else None, "--max-model-len"
    )
    _check_range("--max-model-len", max_len, 1, MAX_POSITIONS)
    utilization = options.gpu_memory_utilization
    if utilization is None and launch is not None:
        utilization = launch.gpu_memory_utilization
        raw = _other(launch, "--gpu-memory-utilization")
        if utilization is None and raw is not None:
            try:
                utilization = float(raw)
            except ValueError:
                raise InputError(
                    f"launch command: --gpu-memory-utilization {raw!r} is not a number"
                ) from None
    utilization = DEFAULT_UTILIZATION if utilization is None else utilization
    _check_range("--gpu-memory-utilization", utilization, 0.01, 1.0)
    kv_dtype = (
        options.kv_cache_dtype
        or (launch.kv_cache_dtype if launch else None)
        or _other(launch, "--kv-cache-dtype")
        or "auto"
    ).strip()
    kv_memory = options.kv_cache_memory_bytes
    if kv_memory is None:
        kv_memory = _as_int("--kv-cache-memory-bytes", _other(launch, "--kv-cache-memory-bytes"))
        _check_range("--kv-cache-memory-bytes", kv_memory, 1, MAX_TOTAL_BYTES)
    space = launch.env.get(CPU_KVCACHE_ENV) if launch is not None else None
    on_cpu = kv_memory is None and bool(space)
    if on_cpu and space is not None:
        try:
            gib = float(space)
        except ValueError:
            gib = math.nan
        if not 0 < gib <= 2**30:
            raise InputError(f"launch command: {CPU_KVCACHE_ENV}={space!r} is not a size in GiB")
        kv_memory = int(gib * GIB)
        notes.append(f"vLLM's CPU backend: {CPU_KVCACHE_ENV}={space} GiB of KV cache")
    return _Settings(
        tensor=tensor,
        pipeline=pipeline,
        data=data,
        decode_context=decode_context,
        expert_parallel=expert_parallel,
        max_len=max_len,
        utilization=utilization,
        kv_dtype=kv_dtype,
        quantization=options.quantization or _other(launch, "--quantization", "-q"),
        dtype=options.dtype or _other(launch, "--dtype"),
        kv_memory=kv_memory,
        on_cpu=on_cpu,
    )


def _sizes(
    shape: ModelShape, settings: _Settings, count: int | None, notes: list[str]
) -> tuple[int, int, int, int]:
    """(TP, PP, DP, DCP): as given, or TP over the GPUs given; InputError for a layout vLLM
    refuses."""
    tp, pp, dp = settings.tensor, settings.pipeline, settings.data
    if tp is None and pp is None and dp is None and count:
        tp, pp = _default_layout(shape, count)
        if count > 1:
            notes.append(
                f"no parallel sizes given: tensor parallel {tp}"
                + (f" x pipeline parallel {pp}" if pp > 1 else "")
                + f" over the {count} GPUs (--tensor-parallel-size / --pipeline-parallel-size "
                "set them)"
            )
    tp, pp, dp, dcp = tp or 1, pp or 1, dp or 1, settings.decode_context or 1
    if not _valid_tensor(shape, tp):
        raise InputError(
            f"--tensor-parallel-size {tp} does not divide the model's {shape.attention_heads} "
            f"attention heads ({shape.kv_heads} KV heads): vLLM refuses to start"
        )
    if pp > len(shape.layers):
        raise InputError(
            f"--pipeline-parallel-size {pp} is more than the model's {len(shape.layers)} layers"
        )
    if tp % dcp:
        raise InputError(
            f"--decode-context-parallel-size {dcp} does not divide --tensor-parallel-size {tp}"
        )
    return tp, pp, dp, dcp


def _dtypes(
    shape: ModelShape, flag: str | None, formats: Formats, notes: list[str]
) -> tuple[str, int, int]:
    """(serving dtype, its bytes, the checkpoint's bytes): vLLM serves a float32 checkpoint in
    bfloat16 unless --dtype says otherwise."""
    checkpoint = shape.dtype or "bfloat16"
    if flag and flag.lower() != "auto":
        serving = flag.lower()
        serving_bytes = _dtype_bytes(formats, serving, "--dtype")
    else:
        if shape.dtype is None:
            notes.append("the config names no dtype: bfloat16 assumed")
        serving = "bfloat16" if checkpoint in ("float32", "float") else checkpoint
        if serving in formats.dtypes:
            serving_bytes = formats.dtypes[serving]
        else:
            notes.append(f"the config's dtype {serving[:40]!r} is unknown: bfloat16 assumed")
            serving, serving_bytes = "bfloat16", 2
        if checkpoint in ("float32", "float"):
            notes.append("float32 checkpoint: vLLM serves it in bfloat16 (--dtype auto)")
    return serving, serving_bytes, formats.dtypes.get(checkpoint, serving_bytes)


@dataclass(frozen=True)
class _Weights:
    layers: tuple[LayerBytes, ...]
    embed: float
    head: float
    source: str
    label: str | None


def _weights(
    shape: ModelShape,
    settings: _Settings,
    serving_bytes: int,
    checkpoint_bytes: int,
    given: tuple[int, str] | None,
    formats: Formats,
    notes: list[str],
) -> _Weights:
    """The weights in memory, layer by layer: the config's parameters in the served dtype and
    quantisation, scaled to the files' total size where it is known (the estimate of the files
    is the checkpoint's dtype and quantisation, multi-token-prediction layers included)."""
    method = None
    if shape.quantization is not None:
        raw = shape.quantization.get("quant_method")
        method = raw if isinstance(raw, str) else "unknown"
    online = settings.quantization if method is None else None
    if online:
        if formats.quant(online) is None:
            known = ", ".join(q.method for q in formats.quantization)
            raise InputError(f"--quantization {online!r} is not modelled (known: {known})")
        notes.append(
            f"online quantisation --quantization {online}: the checkpoint is not quantised"
        )
    loaded = _storage(
        shape.quantization, method or online, serving_bytes, shape, formats, notes, loaded=True
    )
    stored = _storage(
        shape.quantization, method, checkpoint_bytes, shape, formats, [], loaded=False
    )
    layers = tuple(loaded.layer(layer.params) for layer in shape.layers)
    embed = float(shape.embed_params * serving_bytes)
    head = float(shape.lm_head_params * serving_bytes)
    files = (
        sum(stored.layer(layer.params).total for layer in shape.layers)
        + (shape.embed_params + shape.lm_head_params) * checkpoint_bytes
    )
    if shape.mtp_params:
        files += shape.mtp_params * files / max(1, shape.params)
        notes.append(
            "the checkpoint's multi-token-prediction layers are not loaded (vLLM loads them only "
            "for speculative decoding)"
        )
    if given is None or files <= 0:
        notes.append(
            "weights estimated from the config's parameter count (no safetensors index, files or "
            "--weights-bytes)"
        )
        source = f"estimated from the config's {shape.params / 1e9:,.2f}B parameters"
        return _Weights(layers, embed, head, source, loaded.label)
    total, where = given
    factor = total / files
    notes.append(
        f"weights' size from {where}: {total:,} bytes, spread over the GPUs as the config's "
        "layers are"
    )
    if abs(factor - 1) > 0.15:
        notes.append(
            f"the weights' size from {where} is {factor:.2f}x what the config's parameter count "
            "gives: the files' size is used"
        )
    return _Weights(
        scale_bytes(layers, factor),
        embed * factor,
        head * factor,
        f"{where} ({total:,} bytes)",
        loaded.label,
    )


def _kv_element(
    shape: ModelShape, kv_dtype: str, serving_bytes: int, formats: Formats
) -> tuple[int, int | None]:
    """(bytes per KV value, bytes per MLA layer and token when the format fixes it)."""
    key = kv_dtype.lower()
    if key not in formats.kv_cache_dtypes:
        known = ", ".join(formats.kv_cache_dtypes)
        raise InputError(f"--kv-cache-dtype {kv_dtype!r} is not one vLLM has ({known})")
    fixed = None
    if key == "fp8_ds_mla" and "mla" in shape.kinds():
        fixed = formats.mla_fp8_ds_bytes_per_token_per_layer
    return formats.kv_cache_dtypes[key] or serving_bytes, fixed


def _kind_notes(shape: ModelShape, notes: list[str]) -> None:
    if "linear" in shape.kinds():
        notes.append(
            "linear-attention layers keep a fixed state per request (counted in the model's dtype) "
            "and no per-token KV; vLLM pages it in blocks as large as the attention's, so its token "
            "count differs: compare max concurrency, not tokens"
        )
    if "sliding" in shape.kinds():
        notes.append(
            "sliding-window layers keep at most their window per request; kv_tokens counts every "
            "attention layer at the full rate, the concurrency figures cap the windows"
        )


def _reasons(
    case: _Case, result: Figures, gpus: tuple[int, int], device: _Device, concurrency: float
) -> list[str]:
    """Why it does not fit, with the figures (empty when it fits)."""
    count, needed = gpus
    layout = case.layout
    reasons = []
    if count < needed:
        reasons.append(
            f"the launch needs {needed} GPUs (TP {layout.tensor} x PP {layout.pipeline} x DP "
            f"{layout.data}); {count} are given"
        )
    if (
        layout.kv_memory is not None
        and layout.gpu_bytes is not None
        and result.weights_per_gpu + layout.kv_memory > layout.gpu_bytes
    ):
        reasons.append(
            f"the weights ({_gib(result.weights_per_gpu)} per GPU) and the KV cache asked for "
            f"({_gib(layout.kv_memory)}) are more than one {device.label} has "
            f"({_gib(layout.gpu_bytes)})"
        )
    elif layout.kv_memory is None and result.available <= 0:
        usable = (layout.gpu_bytes or 0) * layout.utilization
        reasons.append(
            f"the weights need {_gib(result.weights_per_gpu)} per GPU and the reserve "
            f"{_gib(layout.reserve)}: more than the {_gib(usable)} one {device.label} gives at "
            f"--gpu-memory-utilization {layout.utilization:g}"
        )
    elif concurrency < case.requests:
        one = result.limiting.request_bytes(case.max_len)
        reasons.append(
            f"one request of {case.max_len:,} tokens needs {_gib(one)} of KV cache per GPU; "
            f"{_gib(max(0.0, result.available))} are left after the weights"
            + (" and the reserve" if layout.kv_memory is None else "")
            + f": {concurrency:.2f} of the {case.requests} request(s) asked fit"
            + (" (vLLM refuses to start below one)" if concurrency < 1 else "")
        )
    return reasons


def capacity(options: CapacityOptions, *, kb: KnowledgeBase | None = None) -> CapacityEstimate:
    """Will the model fit: weights per GPU, KV bytes per token, KV tokens left, the requests of
    max_model_len that fit, the verdict (fits / tight / does_not_fit), and the flags that would
    change it. InputError (one line) for input it cannot use."""
    kb = kb or load_knowledge()
    formats = load_formats()
    notes: list[str] = []
    _check_range("--concurrency", options.concurrency, 1, MAX_CONCURRENCY)
    _check_range("--gpu-count", options.gpu_count, 1, MAX_GPU_COUNT)
    _check_range("--weights-bytes", options.weights_bytes, 1, MAX_TOTAL_BYTES)
    _check_range("--kv-cache-memory-bytes", options.kv_cache_memory_bytes, 1, MAX_TOTAL_BYTES)
    _check_range("reserve_bytes", options.reserve_bytes, 0, MAX_TOTAL_BYTES)

    bundle = _read_bundle(options.bundle) if options.bundle is not None else _BundleFacts()
    launch = _parse_launch(options.launch, kb)
    if launch is None and bundle.launch is not None:
        launch = bundle.launch
        notes.append(f"launch from the bundle {bundle.where}")
    files = read_model(options.model)
    shape = files.shape
    notes += shape.notes
    settings = _settings(options, launch, notes)

    device = _device(options, kb, bundle, notes)
    if device.memory is None and settings.kv_memory is None:
        raise InputError(
            "no GPU to fit into: give --gpu NAME (with --gpu-count N), --gpu-memory-gib, a "
            "--bundle, or --kv-cache-memory-bytes"
        )
    tp, pp, dp, dcp = _sizes(shape, settings, device.count, notes)
    gpus_needed = tp * pp * dp
    gpu_count = device.count or gpus_needed
    if device.count is None and device.memory is not None:
        notes.append(f"GPU count not given: the {gpus_needed} the launch uses")
    max_len = settings.max_len
    if max_len is None:
        if shape.max_len is None:
            raise InputError(
                "no --max-model-len given and the config names no maximum length; give one"
            )
        max_len = shape.max_len
        notes.append(f"--max-model-len not given: the model's own {max_len:,} (vLLM's default)")
    if shape.max_len is not None and max_len > shape.max_len:
        notes.append(
            f"--max-model-len {max_len:,} is above the model's {shape.max_len:,}: vLLM refuses it "
            "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )

    serving, serving_bytes, checkpoint_bytes = _dtypes(shape, settings.dtype, formats, notes)
    given: tuple[int, str] | None = None
    if options.weights_bytes is not None:
        given = (options.weights_bytes, "--weights-bytes")
    elif files.total_bytes is not None:
        given = (files.total_bytes, files.total_source or "the model files")
    elif bundle.weights_bytes is not None:
        given = (bundle.weights_bytes, f"the model files in the bundle {bundle.where}")
    weights = _weights(shape, settings, serving_bytes, checkpoint_bytes, given, formats, notes)
    kv_bytes, mla_fixed = _kv_element(shape, settings.kv_dtype, serving_bytes, formats)
    _kind_notes(shape, notes)

    if settings.kv_memory is not None:
        reserve = 0
    elif options.reserve_bytes is not None:
        reserve = options.reserve_bytes
    else:
        reserve = max(RESERVE_FLOOR_BYTES, int(RESERVE_FRACTION * (device.memory or 0)))
        notes.append(
            f"reserve per GPU for activations, CUDA graphs and buffers: {_gib(reserve)} "
            f"(max of {_gib(RESERVE_FLOOR_BYTES)} and {RESERVE_FRACTION:.0%} of the GPU)"
        )
    model = Model(
        layers=shape.layers,
        layer_bytes=weights.layers,
        embed_bytes=weights.embed,
        lm_head_bytes=weights.head,
        tied=shape.tied_embeddings,
        kv_element_bytes=float(kv_bytes),
        state_element_bytes=float(serving_bytes),
        mla_bytes_per_layer=mla_fixed,
    )
    layout = Layout(
        tensor=tp,
        pipeline=pp,
        data=dp,
        decode_context=dcp,
        expert_parallel=settings.expert_parallel,
        gpu_bytes=device.memory,
        utilization=settings.utilization,
        reserve=reserve,
        kv_memory=settings.kv_memory,
    )
    requests = math.ceil(options.concurrency / dp)
    case = _Case(model, layout, max_len, requests, max(shape.max_len or max_len, max_len))
    result = case.figures()
    concurrency = result.concurrency(max_len)
    if not math.isfinite(concurrency):
        concurrency = float(MAX_CONCURRENCY)

    reasons = _reasons(case, result, (gpu_count, gpus_needed), device, concurrency)
    verdict: CapacityVerdict
    changes: list[Change] = []
    if reasons:
        verdict = "does_not_fit"
        changes = _changes(case, shape, gpu_count, device.label, kv_bytes, lambda c: c.fits())
        if gpu_count < gpus_needed:
            changes.insert(
                0,
                Change(
                    flag="--gpu-count",
                    value=str(gpus_needed),
                    effect=f"the {gpus_needed} GPUs the launch's parallel sizes use",
                ),
            )
    elif case.robust():
        verdict = "fits"
    else:
        verdict = "tight"
        reasons.append(
            "it fits with the estimated reserve"
            + (
                f" ({_gib(reserve)} per GPU) but not with twice that"
                if settings.kv_memory is None
                else f" but within {TIGHT_KV_MARGIN:.0%} of the KV memory"
            )
            + "; vLLM's profile decides"
        )
        changes = _changes(case, shape, gpu_count, device.label, kv_bytes, lambda c: c.robust())

    if settings.on_cpu:
        where, unit = "the CPU backend", "worker"
    elif device.memory is None:
        where, unit = "the given KV cache", "GPU"
    else:
        where, unit = f"{gpu_count}x {device.label}", "GPU"
    total_concurrency = round(concurrency * dp, 2)
    if verdict == "does_not_fit":
        summary = f"does not fit on {where}: {reasons[0]}"
    else:
        summary = (
            f"{verdict} on {where}: {total_concurrency:,.2f} request(s) of {max_len:,} tokens "
            f"at once, {_gib(result.weights_per_gpu)} of weights and "
            f"{_gib(max(0.0, result.available))} of KV cache per {unit}"
        )
    return CapacityEstimate(
        verdict=verdict,
        summary=summary,
        model=display_name(files.config_path),
        model_type=shape.model_type,
        architecture=shape.architecture,
        attention=_attention_label(shape),
        parameters=shape.params,
        dtype=serving,
        quantization=weights.label,
        kv_cache_dtype=settings.kv_dtype,
        kv_cache_dtype_bytes=float(kv_bytes),
        device=where,
        gpu_count=gpu_count,
        gpus_needed=gpus_needed,
        gpu_memory_bytes=device.memory,
        gpu_memory_utilization=settings.utilization,
        parallel=ParallelSizes(
            tensor=tp,
            pipeline=pp,
            data=dp,
            decode_context=dcp,
            expert_parallel=settings.expert_parallel,
        ),
        max_model_len=max_len,
        model_max_len=shape.max_len,
        concurrency=options.concurrency,
        weights_bytes_total=round(result.weights_total),
        weights_source=weights.source,
        weights_bytes_per_gpu=round(result.weights_per_gpu),
        reserve_bytes_per_gpu=reserve,
        kv_memory_bytes_per_gpu=round(result.available),
        kv_bytes_per_token=round(result.per_token_total),
        kv_bytes_per_token_per_gpu=round(result.per_token_per_gpu),
        kv_bytes_per_token_full_layers=round(result.full_per_token_total),
        fixed_bytes_per_request=round(result.state_total),
        kv_tokens=result.kv_tokens,
        max_concurrency_at_max_model_len=total_concurrency,
        max_context_at_concurrency=result.max_context(requests, case.cap),
        reasons=reasons,
        changes=changes,
        assumptions=notes,
    )
