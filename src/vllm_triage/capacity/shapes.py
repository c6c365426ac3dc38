"""A model's shape from its Hugging Face config.json: per layer, the attention kind (full, sliding
window, MLA, linear), the KV-cache width per token, the fixed per-request state, and the parameter
counts by how vLLM spreads them over GPUs; plus the weights' total size where the folder says it.

Everything read here comes from anyone (a downloaded model folder): every file is read capped,
JSON through vllm_triage.safejson, and every number is checked for type and range before it is
multiplied, so a hostile config.json ends in one line, never in a huge allocation or a traceback.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.safejson import parse_json, read_capped, read_json_file

# A config.json is a few KiB (gpt-oss-120b's, with its 36 layer_types, is 2 KiB); 4 MiB is far
# above any real one and bounds what a hostile file costs.
MAX_CONFIG_BYTES = 4 * 1024**2
# model.safetensors.index.json maps every tensor to its shard: DeepSeek-V3's is about 9 MiB. Only
# metadata.total_size is needed, which sits at the start: the head is searched first, and the whole
# file is parsed only when it is small enough.
MAX_INDEX_BYTES = 32 * 1024**2
INDEX_HEAD_BYTES = 64 * 1024
MAX_SHARD_FILES = 10_000
# Ranges no real model leaves (the largest configs have ~160 layers, vocabularies of ~260k,
# ~100k-wide layers); numbers outside them are refused as not a model config.
MAX_LAYERS = 10_000
MAX_WIDTH = 10_000_000
MAX_COUNT = 1_000_000
MAX_POSITIONS = 2**40
MAX_TOTAL_BYTES = 2**60

CONFIG_NAME = "config.json"
INDEX_NAME = "model.safetensors.index.json"

AttentionKind = Literal["full", "sliding", "mla", "linear"]

_TOTAL_SIZE = re.compile(rb'"total_size"\s*:\s*([0-9]{1,20})\s*[,}]')
# The keys vLLM reads the model's own maximum length from (it takes the smallest one present).
_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
    "model_max_length",
)
_LAYER_TYPES: dict[str, AttentionKind] = {
    "full_attention": "full",
    "attention": "full",
    "global_attention": "full",
    "sliding_attention": "sliding",
    "local_attention": "sliding",
    "chunked_attention": "sliding",
    "linear_attention": "linear",
}


@dataclass(frozen=True)
class Params:
    """Parameter counts of one layer (or of the model's ends), by how vLLM spreads them: split
    across tensor-parallel ranks (attention, mlp, shared), split across TP or the expert-parallel
    group (experts), or whole on every rank (replicated: MLA's down-projections; router, norms)."""

    attention: int = 0
    replicated: int = 0
    mlp: int = 0
    experts: int = 0
    shared: int = 0
    router: int = 0
    norms: int = 0

    @property
    def total(self) -> int:
        return (
            self.attention
            + self.replicated
            + self.mlp
            + self.experts
            + self.shared
            + self.router
            + self.norms
        )


@dataclass(frozen=True)
class Layer:
    """One decoder layer: its attention kind and what it keeps per token and per request.

    `kv_width` is the elements one token takes in this layer's cache, for the whole model (K and
    V together; MLA: its one latent); `kv_heads` the KV heads tensor parallelism splits (0 for MLA,
    whose latent every rank holds whole); `window` the tokens a sliding layer keeps at most;
    `state` the elements of fixed per-request state of a linear-attention layer."""

    attention: AttentionKind
    kv_width: int
    kv_heads: int
    window: int | None
    state: int
    params: Params


@dataclass(frozen=True)
class ModelShape:
    """What capacity needs of a model, read from its config.json."""

    model_type: str
    architecture: str
    layers: tuple[Layer, ...]
    hidden: int
    vocab: int
    attention_heads: int
    kv_heads: int
    tied_embeddings: bool
    embed_params: int
    lm_head_params: int
    mtp_params: int
    dtype: str | None
    max_len: int | None
    quantization: Mapping[str, Any] | None
    experts: int
    expert_width: int
    notes: tuple[str, ...] = ()

    @property
    def layer_params(self) -> int:
        return sum(layer.params.total for layer in self.layers)

    @property
    def params(self) -> int:
        """Parameters vLLM loads (the multi-token-prediction layers only with speculative
        decoding: not counted)."""
        return self.layer_params + self.embed_params + self.lm_head_params

    def kinds(self) -> dict[AttentionKind, int]:
        counts: dict[AttentionKind, int] = {}
        for layer in self.layers:
            counts[layer.attention] = counts.get(layer.attention, 0) + 1
        return counts


@dataclass(frozen=True)
class ModelFiles:
    """The model as given: its config, and the weights' total bytes where the folder says it."""

    config_path: Path
    shape: ModelShape
    total_bytes: int | None
    total_source: str | None
    notes: tuple[str, ...] = field(default=())


class _Config:
    """Typed, range-checked access to a config.json's values; errors name the file and the key."""

    def __init__(self, document: Mapping[str, Any], where: str) -> None:
        self.doc = document
        self.where = where

    def fail(self, key: str, reason: str) -> InputError:
        return InputError(f"{self.where}: {key} {reason}; not a model config capacity can read")

    def integer(
        self, *keys: str, default: int | None = None, low: int = 1, high: int = MAX_WIDTH
    ) -> int | None:
        """The first of `keys` that is set (not null), as an int in [low, high]."""
        for key in keys:
            value = self.doc.get(key)
            if value is None:
                continue
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(key, f"is {type(value).__name__}, not an integer")
            if not low <= value <= high:
                raise self.fail(key, f"is {value}, outside {low}..{high}")
            return value
        return default

    def need(self, *keys: str, low: int = 1, high: int = MAX_WIDTH) -> int:
        value = self.integer(*keys, low=low, high=high)
        if value is None:
            raise InputError(
                f"{self.where}: no {' / '.join(keys)}; not a decoder model config capacity can read"
            )
        return value

    def text(self, key: str) -> str | None:
        value = self.doc.get(key)
        return value if isinstance(value, str) else None

    def boolean(self, key: str) -> bool | None:
        value = self.doc.get(key)
        return value if isinstance(value, bool) else None

    def int_list(self, key: str) -> list[int]:
        value = self.doc.get(key)
        if not isinstance(value, list):
            return []
        if len(value) > MAX_LAYERS:
            raise self.fail(key, f"has {len(value)} entries")
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]


def _text_part(document: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
    """The language model's part of a multimodal config (text_config / llm_config)."""
    if "num_hidden_layers" in document:
        return document, []
    for key in ("text_config", "llm_config", "language_config"):
        inner = document.get(key)
        if isinstance(inner, dict) and "num_hidden_layers" in inner:
            merged = dict(inner)
            for shared_key in (
                "quantization_config",
                "torch_dtype",
                "dtype",
                "tie_word_embeddings",
            ):
                if shared_key not in merged and shared_key in document:
                    merged[shared_key] = document[shared_key]
            return merged, [
                f"multimodal config: the language model's {key} was read; the vision or audio "
                "encoder's weights are not counted"
            ]
    return document, []


def _max_len(config: _Config) -> int | None:
    """The model's own maximum length as vLLM derives it: the smallest of the length keys, times
    the RoPE scaling factor for the scaling types that extend it (yarn from its original length)."""
    lengths = [config.integer(key, high=MAX_POSITIONS) for key in _MAX_LEN_KEYS]
    present = [length for length in lengths if length is not None]
    if not present:
        return None
    derived = min(present)
    rope = config.doc.get("rope_scaling") or config.doc.get("rope_parameters")
    if isinstance(rope, dict):
        kind = rope.get("rope_type", rope.get("type"))
        factor = rope.get("factor")
        if (
            isinstance(kind, str)
            and kind not in ("su", "longrope", "llama3", "default", "mrope")
            and isinstance(factor, int | float)
            and not isinstance(factor, bool)
            and 1 <= factor <= 1024
        ):
            original = rope.get("original_max_position_embeddings")
            if kind == "yarn" and isinstance(original, int) and 0 < original <= MAX_POSITIONS:
                derived = original
            derived = int(derived * factor)
    return min(derived, MAX_POSITIONS)


def _kinds(config: _Config, layers: int, mla: bool) -> tuple[list[AttentionKind], list[str]]:
    """Each layer's attention kind, from layer_types, full_attention_interval or the sliding-window
    keys the config sets."""
    notes: list[str] = []
    base: AttentionKind = "mla" if mla else "full"
    window = config.integer("sliding_window", "attention_chunk_size", high=MAX_POSITIONS)
    sliding_off = config.boolean("use_sliding_window") is False
    raw = config.doc.get("layer_types")
    if isinstance(raw, list) and raw:
        if len(raw) > MAX_LAYERS:
            raise config.fail("layer_types", f"has {len(raw)} entries")
        if len(raw) != layers:
            notes.append(
                f"layer_types has {len(raw)} entries for {layers} layers: the first "
                f"{min(len(raw), layers)} were used, the rest read as full attention"
            )
        kinds: list[AttentionKind] = []
        unknown: set[str] = set()
        for index in range(layers):
            name = raw[index] if index < len(raw) else "full_attention"
            kind = _LAYER_TYPES.get(name) if isinstance(name, str) else None
            if kind is None:
                unknown.add(str(name)[:40])
                kind = "full"
            if kind == "sliding" and (window is None or sliding_off):
                kind = "full"
            kinds.append(base if kind == "full" else kind)
        if unknown:
            notes.append(
                f"layer type(s) {', '.join(sorted(unknown))} not modelled: counted as full "
                "attention (an over-estimate of their KV cache)"
            )
        return kinds, notes
    interval = config.integer("full_attention_interval", high=MAX_LAYERS)
    if interval is not None:
        return [base if (i + 1) % interval == 0 else "linear" for i in range(layers)], notes
    if window is not None and not sliding_off and config.doc.get("sliding_window") is not None:
        pattern = config.integer("sliding_window_pattern", high=MAX_LAYERS)
        if pattern is not None:
            return [base if (i + 1) % pattern == 0 else "sliding" for i in range(layers)], notes
        first = config.integer("max_window_layers", low=0, high=MAX_LAYERS)
        if first is not None and config.boolean("use_sliding_window"):
            return ["sliding" if i >= first else base for i in range(layers)], notes
        return ["sliding"] * layers, notes
    return [base] * layers, notes


def _moe_layers(config: _Config, layers: int, experts: int) -> list[bool]:
    """Which layers are mixture-of-experts (DeepSeek's first_k_dense_replace / moe_layer_freq,
    Qwen's decoder_sparse_step / mlp_only_layers)."""
    if experts <= 1:
        return [False] * layers
    dense_first = config.integer("first_k_dense_replace", low=0, high=MAX_LAYERS) or 0
    frequency = config.integer("moe_layer_freq", high=MAX_LAYERS) or 1
    step = config.integer("decoder_sparse_step", high=MAX_LAYERS) or 1
    only_dense = set(config.int_list("mlp_only_layers"))
    return [
        i >= dense_first and i % frequency == 0 and (i + 1) % step == 0 and i not in only_dense
        for i in range(layers)
    ]


def read_shape(document: Mapping[str, Any], where: str) -> ModelShape:
    """The shape of a decoder model from its parsed config.json; InputError (one line) when the
    config lacks what a decoder needs or holds values outside any real model's range."""
    part, notes = _text_part(document)
    c = _Config(part, where)
    layers = c.need("num_hidden_layers", "n_layer", "num_layers", high=MAX_LAYERS)
    hidden = c.need("hidden_size", "n_embd", "d_model")
    heads = c.need("num_attention_heads", "n_head", high=MAX_COUNT)
    kv_heads = c.integer(
        "num_key_value_heads", "num_kv_heads", "multi_query_group_num", high=MAX_COUNT
    )
    kv_heads = kv_heads or heads
    head_dim = c.integer("head_dim") or max(1, hidden // heads)
    vocab = c.need("vocab_size", "padded_vocab_size", high=100_000_000)
    intermediate = c.integer("intermediate_size", "ffn_hidden_size", "n_inner") or 4 * hidden
    experts = c.integer(
        "num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts", low=0
    )
    experts = experts or 0
    expert_width = c.integer("moe_intermediate_size") or intermediate
    shared_count = c.integer("n_shared_experts", low=0, high=MAX_COUNT) or 0
    shared_width = c.integer("shared_expert_intermediate_size", low=0) or 0
    kv_lora = c.integer("kv_lora_rank", low=0) or 0
    mla = kv_lora > 0
    kinds, kind_notes = _kinds(c, layers, mla)
    notes += kind_notes
    moe = _moe_layers(c, layers, experts)
    window = c.integer("sliding_window", "attention_chunk_size", high=MAX_POSITIONS)
    norms = 2 * hidden

    # Attention of a full / sliding layer (GQA, MHA, MQA alike).
    standard = Params(
        attention=hidden * heads * head_dim * 2 + 2 * hidden * kv_heads * head_dim,
        norms=norms,
    )
    mla_params = Params()
    mla_width = 0
    if mla:
        rope = c.need("qk_rope_head_dim")
        nope = c.integer("qk_nope_head_dim") or head_dim
        v_dim = c.integer("v_head_dim") or head_dim
        q_lora = c.integer("q_lora_rank", low=0) or 0
        q = q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        mla_params = Params(
            attention=q + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden,
            replicated=hidden * q_lora + hidden * (kv_lora + rope),
            norms=norms + q_lora + kv_lora,
        )
        mla_width = kv_lora + rope
    linear_params = Params()
    linear_state = 0
    if "linear" in kinds:
        key_heads = c.integer("linear_num_key_heads", high=MAX_COUNT)
        value_heads = c.integer("linear_num_value_heads", high=MAX_COUNT)
        key_dim = c.integer("linear_key_head_dim")
        value_dim = c.integer("linear_value_head_dim")
        kernel = c.integer("linear_conv_kernel_dim", high=1024) or 4
        if key_heads and value_heads and key_dim and value_dim:
            conv = 2 * key_heads * key_dim + value_heads * value_dim
            linear_params = Params(
                attention=hidden * (2 * key_heads * key_dim + 2 * value_heads * value_dim)
                + hidden * 2 * value_heads
                + value_heads * value_dim * hidden
                + conv * kernel,
                norms=norms + value_dim,
            )
            # Gated DeltaNet: a causal-conv state of kernel-1 steps and one key x value matrix
            # per value head, whatever the context length.
            linear_state = (kernel - 1) * conv + value_heads * key_dim * value_dim
        else:
            linear_params = standard
            notes.append(
                "linear-attention layers without linear_* sizes in the config: their weights are "
                "counted as full attention's and their fixed state is not counted"
            )

    built: list[Layer] = []
    for index, kind in enumerate(kinds):
        if kind == "mla":
            attention = mla_params
        elif kind == "linear":
            attention = linear_params
        else:
            attention = standard
        if moe[index]:
            shared = shared_count * 3 * hidden * expert_width
            if shared_width:
                shared += 3 * hidden * shared_width + hidden
            ffn = Params(
                experts=experts * 3 * hidden * expert_width,
                shared=shared,
                router=hidden * experts,
            )
        else:
            ffn = Params(mlp=3 * hidden * intermediate)
        params = Params(
            attention=attention.attention,
            replicated=attention.replicated,
            mlp=ffn.mlp,
            experts=ffn.experts,
            shared=ffn.shared,
            router=ffn.router,
            norms=attention.norms,
        )
        if kind == "mla":
            built.append(Layer(kind, mla_width, 0, None, 0, params))
        elif kind == "linear":
            built.append(Layer(kind, 0, 0, None, linear_state, params))
        else:
            built.append(
                Layer(
                    kind,
                    2 * kv_heads * head_dim,
                    kv_heads,
                    window if kind == "sliding" else None,
                    0,
                    params,
                )
            )

    tied = c.boolean("tie_word_embeddings")
    if tied is None:
        tied = True  # transformers' default when a config does not say
    embed = vocab * hidden
    mtp_layers = c.integer("num_nextn_predict_layers", low=0, high=MAX_LAYERS) or 0
    mtp = mtp_layers * (built[-1].params.total + 2 * hidden * hidden) if built else 0
    dtype = c.text("torch_dtype") or c.text("dtype")
    architectures = part.get("architectures")
    architecture = (
        architectures[0]
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
        else ""
    )
    quantization = part.get("quantization_config")
    return ModelShape(
        model_type=(c.text("model_type") or "")[:80],
        architecture=architecture[:120],
        layers=tuple(built),
        hidden=hidden,
        vocab=vocab,
        attention_heads=heads,
        kv_heads=kv_heads,
        tied_embeddings=tied,
        embed_params=embed,
        lm_head_params=0 if tied else embed,
        mtp_params=mtp,
        dtype=dtype.lower()[:40] if dtype else None,
        max_len=_max_len(c),
        quantization=quantization if isinstance(quantization, dict) else None,
        experts=experts,
        expert_width=expert_width,
        notes=tuple(notes),
    )


def _regular_size(path: Path) -> int | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _index_total(path: Path) -> int | None:
    """metadata.total_size of a safetensors index: searched in the file's head, the whole file
    parsed only when it is within MAX_INDEX_BYTES."""
    shown = display_name(path)
    head = read_capped(path, shown, INDEX_HEAD_BYTES)
    match = _TOTAL_SIZE.search(head)
    if match is None:
        size = _regular_size(path) or 0
        if size > MAX_INDEX_BYTES:
            raise InputError(f"{shown}: larger than {MAX_INDEX_BYTES} bytes; not parsed")
        document = read_json_file(path, shown, max_bytes=MAX_INDEX_BYTES)
        metadata = document.get("metadata") if isinstance(document, dict) else None
        value = metadata.get("total_size") if isinstance(metadata, dict) else None
    else:
        value = int(match.group(1))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TOTAL_BYTES:
        raise InputError(f"{shown}: metadata.total_size {value!r} is not a size in bytes")
    return value


def _shard_total(folder: Path) -> tuple[int, int] | None:
    """The summed size of the folder's *.safetensors files (no index), and how many there are."""
    total = count = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.name.endswith(".safetensors"):
                    continue
                count += 1
                if count > MAX_SHARD_FILES:
                    return None
                size = _regular_size(Path(entry.path))
                if size is not None:
                    total += size
    except OSError:
        return None
    return (total, count) if count else None


def read_model(path: str | Path) -> ModelFiles:
    """A model folder (or its config.json) read: the config's shape, and the weights' total size
    from model.safetensors.index.json, else from the *.safetensors files beside it."""
    given = Path(path)
    try:
        is_folder = given.is_dir()
    except OSError:
        is_folder = False
    config_path = given / CONFIG_NAME if is_folder else given
    shown = display_name(config_path)
    if not is_folder and not os.path.lexists(given):
        raise InputError(f"{display_name(given)}: no such model folder or config.json")
    document = read_json_file(config_path, shown, max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(document, dict):
        raise InputError(f"{shown}: not a JSON object; not a model config")
    shape = read_shape(document, shown)
    folder = config_path.parent
    index = folder / INDEX_NAME
    total: int | None = None
    source: str | None = None
    if _regular_size(index) is not None:
        total = _index_total(index)
        if total is not None:
            source = f"{INDEX_NAME} metadata.total_size"
    if total is None:
        shards = _shard_total(folder)
        if shards is not None and shards[0] > 0:
            total = shards[0]
            source = f"the size of {shards[1]} *.safetensors file(s) beside the config"
    return ModelFiles(config_path, shape, total, source)


def parse_config_text(text: str | bytes, where: str = CONFIG_NAME) -> ModelShape:
    """The shape of a config given as text (tests, and callers holding the JSON already)."""
    document = parse_json(text, where, max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(document, dict):
        raise InputError(f"{where}: not a JSON object; not a model config")
    return read_shape(document, where)
