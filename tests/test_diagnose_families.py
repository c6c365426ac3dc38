"""Rules written from the family of messages, not from the words of one file: the same failure as
vLLM (V0 and V1), Ray workers, PyTorch, NCCL, transformers / huggingface_hub, container runtimes,
Kubernetes and other engines (SGLang, TGI, Ollama, llama.cpp) word it. None of these lines is in
the development corpus; each is the shape the tool's users paste (wording from the projects'
sources and public reports)."""

from __future__ import annotations

import pytest

CASES = [
    # driver_too_old: version comparisons (advised) and candidates (not advised)
    (
        "(EngineCore_DP0 pid=231) ERROR 08-01 10:00:00 [core.py:700] RuntimeError: Unexpected "
        "error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
        "NumCudaDevices() that might have already set an error? Error 35: CUDA driver version is "
        "insufficient for CUDA runtime version",
        "driver_too_old",
        True,
    ),
    (
        'time=2025-03-01T10:00:00.000Z level=INFO source=gpu.go:602 msg="unable to load cudart '
        'library" library=/usr/lib/ollama/cuda_v12/libcudart.so.12 error="cudart init failure: '
        '35"\ntime=2025-03-01T10:00:00.001Z level=INFO source=gpu.go:386 msg="no compatible GPUs '
        'were discovered"',
        "driver_too_old",
        True,
    ),
    (
        "Error: failed to create containerd task: failed to create shim task: OCI runtime create "
        "failed: runc create failed: unable to start container process: error during container "
        "init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected "
        "mode as 'legacy' nvidia-container-cli: requirement error: unsatisfied condition: "
        "cuda>=13.0, please update your driver to a newer version, or use an earlier cuda "
        "container: unknown",
        "driver_too_old",
        True,
    ),
    (
        "triton.runtime.errors: CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled "
        "with an unsupported toolchain",
        "driver_too_old",
        False,
    ),
    # unsupported_gpu_arch
    (
        "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'",
        "unsupported_gpu_arch",
        False,
    ),
    (
        "  warnings.warn(incompatible_device_warn.format(device_name, capability, "
        '" ".join(arch_list), device_name))\nNVIDIA B200 with CUDA capability sm_100 is not '
        "compatible with the current PyTorch installation.",
        "unsupported_gpu_arch",
        False,
    ),
    (
        "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
        "unsupported_gpu_arch",
        False,
    ),
    # no_gpu_visible
    (
        "  Warning  FailedScheduling  12s   default-scheduler  0/3 nodes are available: 3 "
        "Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available",
        "no_gpu_visible",
        False,
    ),
    (
        "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected",
        "no_gpu_visible",
        False,
    ),
    (
        "Error: crun: cannot stat `/dev/nvidia0`: No such file or directory: unresolvable CDI "
        "devices nvidia.com/gpu=all",
        "no_gpu_visible",
        False,
    ),
    # driver_library_mismatch, compat, fabric manager
    (
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.148",
        "driver_library_mismatch",
        False,
    ),
    (
        "2025-01-01 12:00:00.000000: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:152] "
        "failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has unsupported "
        "display driver / cuda driver combination",
        "compat_lib_error",
        False,
    ),
    (
        "[Jan 01 2025 10:00:00] [ERROR] [tid 123] fabric manager NVIDIA GPU driver interface "
        "version 570.86.15 don't match with driver version 570.124.06. Please update with "
        "matching NVIDIA driver package.",
        "fabric_manager_missing",
        False,
    ),
    # memory
    (
        "2024-05-01T10:00:00.000000Z ERROR warmup{max_input_length=4095 max_prefill_tokens=4096 "
        "max_total_tokens=4096}:warmup: text_generation_client: router/client/src/lib.rs:46: "
        "Server error: CUDA out of memory. Tried to allocate 1.95 GiB\n"
        'Error: Warmup(Generation("CUDA out of memory. Tried to allocate 1.95 GiB"))',
        "oom_at_load",
        False,
    ),
    (
        "[2025-01-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2000, in '
        "event_loop_overlap\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "oom_under_load",
        False,
    ),
    (
        "[2025-01-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "kv_cache_insufficient",
        False,
    ),
    (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 17179869184 bytes.",
        "oom_at_load",
        False,
    ),
    (
        "Warning  OOMKilling  5m  kernel-monitor  Memory cgroup out of memory: Killed process "
        "28561 (python3) total-vm:62400000kB, anon-rss:31000000kB",
        "host_memory",
        False,
    ),
    (
        "INFO 2025-01-01 10:00:00,000 serve 123 -- Task was killed due to the node running low on "
        "memory.",
        "host_memory",
        False,
    ),
    # model files and hub
    (
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. (Request ID: Root=1-x)"
        "\nRepository Not Found for url: https://huggingface.co/api/models/meta-llama/Llama-4-8B"
        "/revision/main.",
        "model_path_or_access",
        False,
    ),
    (
        "llama_model_load: error loading model: llama_model_loader: failed to load model from "
        "/models/qwen2.5-7b-instruct-q4_k_m.gguf",
        "model_path_or_access",
        False,
    ),
    (
        "requests.exceptions.SSLError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co',"
        " port=443): Max retries exceeded with url: /api/models/Qwen/Qwen3-8B (Caused by "
        "SSLError(SSLCertVerificationError(1, 'certificate verify failed')))\"), '(Request ID: x)')",
        "model_path_or_access",
        False,
    ),
    (
        "PermissionError: [Errno 13] Permission denied: '/home/vllm/.cache/vllm/torch_compile_cache'",
        "cache_dir_not_writable",
        False,
    ),
    # the transformers beside the engine too old, by the corpus's base rate (VT425: the engine
    # too old is in the differential)
    (
        "ValueError: The checkpoint you are trying to load has model type `qwen3_next` but "
        "Transformers does not recognize this architecture.",
        "dependency_mismatch",
        False,
    ),
    (
        "Error: llama runner process has terminated: error loading model: error loading model "
        "architecture: unknown model architecture: 'glm4moe'",
        "model_arch_unsupported",
        False,
    ),
    # communication and shared memory
    (
        "(RayWorkerWrapper pid=3300, ip=10.0.0.2) torch.distributed.DistNetworkError: The client "
        "socket has timed out after 600000ms while trying to connect to (10.0.0.1, 29500).",
        "nccl_or_network",
        False,
    ),
    (
        "node-2:123:456 [1] transport/net_socket.cc:50 NCCL WARN NET/Socket : socketStartConnect: "
        "Connect to 10.0.0.1<45678> failed : Software caused connection abort",
        "nccl_or_network",
        False,
    ),
    (
        "RuntimeError: DataLoader worker (pid 1234) is killed by signal: Bus error. It is possible "
        "that dataloader's workers are out of shared memory. Please try to raise your shared "
        "memory limit.",
        "shm_insufficient",
        False,
    ),
    # environment and command line
    (
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
        "dependency_mismatch",
        False,
    ),
    (
        "TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument "
        "'disable_log_requests'",
        "dependency_mismatch",
        False,
    ),
    (
        "error: unexpected argument '--num-shards' found\n\n  tip: a similar argument exists: "
        "'--num-shard'",
        "bad_cli_argument",
        False,
    ),
    (
        "vllm serve: error: argument --max-model-len: invalid int value: '32k'",
        "bad_cli_argument",
        False,
    ),
    # requests to a running server
    (
        "openai.BadRequestError: Error code: 400 - {'error': {'message': 'This model does not "
        "have a chat template', 'type': 'BadRequestError'}}",
        "chat_template",
        False,
    ),
    (
        "Error: registry.ollama.ai/library/llama2:latest does not support tools",
        "tool_call_parser",
        False,
    ),
    (
        "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"This model's "
        "maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the "
        "messages, 1000 in the completion). Please reduce the length of the messages or "
        "completion.\", 'type': 'BadRequestError'}",
        "no_failure",
        False,
    ),
]


@pytest.mark.parametrize(("log", "cause", "advised"), CASES, ids=lambda v: str(v)[:40])
def test_family_wording(diagnose_text, log: str, cause: str, advised: bool) -> None:
    result = diagnose_text(log + "\n")
    assert result.primary.cause == cause, (result.primary.rule, result.primary.summary)
    assert result.primary.driver_change_advised is advised
    if cause != "driver_too_old":
        assert not any(f.driver_change_advised for f in result.findings)


BENIGN = [
    "node-1:123:456 [0] NCCL WARN NET/IB : No device found.",
    "(Worker_TP0 pid=11) WARNING 11-30 18:54:38 [custom_all_reduce.py:154] Custom allreduce is "
    "disabled because your platform lacks GPU P2P capability or P2P test failed.",
    "(APIServer pid=1) INFO 11-30 18:55:19 [hf.py:648] Detected the chat template content format "
    "to be 'string'. You can set `--chat-template-content-format` to override this.",
]


@pytest.mark.parametrize("line", BENIGN, ids=lambda v: v[:40])
def test_benign_lines_name_no_failure_cause(diagnose_text, line: str) -> None:
    assert diagnose_text(line + "\n").primary.cause in ("unknown", "no_failure")
