"""A stand-in for `vllm serve` in the start-stability tests that need no real engine: it writes
vLLM's start-up milestones to its output the way vLLM does, then serves the fake OpenAI server
(tests/fakeserver.py) on the --port it was given; or fails the way a server on a too-old driver
does. The mode comes from FAKE_VLLM_MODE:

- ready (default): milestones, then serve until SIGTERM;
- driver_too_old: the CUDA initialisation error of an r575 host running a CUDA 13 image, exit 1;
- ignore_term: ready, but SIGTERM is ignored (only SIGKILL stops it);
- never_ready: milestones up to loading, then nothing (a start that hangs).

Run through a `vllm` wrapper the tests write (`vllm serve MODEL --port P ...`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fakeserver import _Handler, _State


def _say(process: str, message: str) -> None:
    print(f"({process} pid={os.getpid()}) INFO 12-01 10:00:00 [fake.py:1] {message}", flush=True)


def main(argv: list[str]) -> int:
    mode = os.environ.get("FAKE_VLLM_MODE", "ready")
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000
    model = argv[argv.index("serve") + 1] if "serve" in argv else "fake-model"
    _say("APIServer", f"non-default args: {{'model_tag': '{model}', 'args': {argv[1:]!r}}}")
    time.sleep(0.2)
    _say("EngineCore", f"Initializing a V1 LLM engine (v0.32.0) with config: model='{model}'")
    if mode == "driver_too_old":
        print(
            "RuntimeError: The NVIDIA driver on your system is too old (found version 12090). "
            "Please update your GPU driver by downloading and installing a new version from the "
            "URL: http://www.nvidia.com/Download/index.aspx",
            flush=True,
        )
        return 1
    _say("Worker", f"Starting to load model {model}...")
    if mode == "never_ready":
        time.sleep(3600)
        return 1
    time.sleep(0.3)
    _say("Worker", "Loading weights took 0.01 seconds")
    _say("EngineCore", "init engine (profile, create kv cache, warmup model) took 0.40 s")
    if mode == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from http.server import ThreadingHTTPServer

    state = _State(model="fake-model")
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    _say("APIServer", f"Starting vLLM server on http://127.0.0.1:{port}")
    print("INFO:     Application startup complete.", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a clean exit on SIGTERM, like vLLM
    if os.environ.get("FAKE_VLLM_MODE") == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(main(sys.argv))
