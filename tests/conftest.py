"""Shared fixtures: the knowledge base, the real test data, a helper to diagnose text, and real
vLLM servers (tests/realserver.py) for the tests marked `realserver`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import realserver
from hypothesis import HealthCheck, settings

from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.models import Diagnosis

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent
# Real registries for the image tests, and --image resolved by tag unless a test asks for more.
pytest_plugins = ["registry"]

# Hypothesis's deadline per example and its too-slow health check are wall-clock thresholds that a
# slow or loaded machine trips; under CI the examples are derived from each test, so a run there
# is repeatable (a developer's run explores new ones).
settings.register_profile(
    "vllm-triage",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI") == "true",
)
settings.load_profile("vllm-triage")


@pytest.fixture(scope="session", autouse=True)
def _own_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The knowledge cache of this test session (and of the commands it starts) is its own: no
    test reads what another run left in the user's cache, or writes there."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(scope="session")
def kb() -> KnowledgeBase:
    """The packaged knowledge, validated from its files (not from the cache commands use)."""
    return load_knowledge(cached=False)


@pytest.fixture
def diagnose_text(tmp_path: Path):
    """Write text to a log file and diagnose it (extra keyword arguments go to diagnose)."""

    def run(text: str, **kwargs: str) -> Diagnosis:
        log = tmp_path / "case.log"
        log.write_text(text, encoding="utf-8")
        return diagnose(DiagnoseOptions(logs=(str(log),), **kwargs))

    return run


# --- real vLLM servers ----------------------------------------------------------------------------

# The fixtures that bring up a real part, by the marker a test that uses one carries (pyproject
# declares the markers; `make quick` deselects them).
PART_FIXTURES = {
    "realserver": ("real_server", "real_server_plain", "tiny_llama"),
    "browser": ("browser", "pages"),
    "registry": ("registries", "real_registry"),
    "sshd": ("ssh_hosts",),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses a real part carries that part's marker (-m "not realserver")."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in PART_FIXTURES.items():
            if used.intersection(fixtures):
                item.add_marker(getattr(pytest.mark, marker))


def _vllm_python_or_skip() -> Path:
    python = realserver.vllm_python()
    if python is not None:
        return python
    configured = os.environ.get(realserver.ENV_VLLM_PYTHON, "").strip()
    if configured:
        reason = f"no vLLM environment: {realserver.ENV_VLLM_PYTHON}={configured} is not a Python"
    else:
        reason = (
            f"no vLLM environment: {realserver.ENV_VLLM_PYTHON} is unset and "
            f"{realserver.REPO / '.venv-vllm'} does not exist (`make vllm-env` builds it)"
        )
    if realserver.require_server():
        pytest.fail(f"{realserver.ENV_REQUIRE_SERVER}=1 and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def tiny_llama() -> Path:
    """The tiny random-weight Llama's folder (made once per content of its script, then cached)."""
    return realserver.tiny_model(realserver.CACHE_DIR, _vllm_python_or_skip())


@pytest.fixture(scope="session")
def real_server(tiny_llama: Path) -> Iterator[realserver.RealServer]:
    """vLLM's defaults (prefix caching on) plus the Hermes tool parser, for the whole session."""
    args = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    with realserver.serve(tiny_llama, *args, name="real_server") as server:
        yield server


@pytest.fixture(scope="session")
def real_server_plain(tiny_llama: Path) -> Iterator[realserver.RealServer]:
    """Prefix caching off and no tool parser, for the whole session (both servers fit in RAM)."""
    with realserver.serve(
        tiny_llama, "--no-enable-prefix-caching", name="real_server_plain"
    ) as server:
        yield server
