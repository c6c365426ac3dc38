"""The knowledge cache: a run after the first loads the validated knowledge base from the user's
cache folder; any change to what it was made from rebuilds it; a cache that is corrupt, foreign,
not private to the user or in a folder that cannot be written is never trusted and never an
error: the knowledge is validated from the files instead."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vllm_triage.knowledge import DATA_DIR, KnowledgeBase, KnowledgeError, load_knowledge
from vllm_triage.knowledge.cache import _file_name, cache_key, load_cached
from vllm_triage.knowledge.loader import _load
from vllm_triage.usercache import CACHE_FOLDER_NAME, read_cached


class Counting:
    """The validating loader, counting how often the cache had to fall back on it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, root: Path) -> KnowledgeBase:
        self.calls += 1
        return _load(root)


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / CACHE_FOLDER_NAME


@pytest.fixture
def data(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


def _cache_file(folder: Path) -> Path:
    files = list(folder.glob("knowledge-*.pickle"))
    assert len(files) == 1, files
    return files[0]


@pytest.mark.slow
def test_the_second_load_comes_from_the_cache(cache_home: Path, data: Path) -> None:
    build = Counting()
    first = load_cached(data, build, KnowledgeBase)
    second = load_cached(data, build, KnowledgeBase)
    assert build.calls == 1
    assert second == first == _load(data)
    assert second.recipes["kimi-k3"].tool_calls.flags == first.recipes["kimi-k3"].tool_calls.flags
    assert oct(cache_home.stat().st_mode & 0o777) == "0o700"
    assert oct(_cache_file(cache_home).stat().st_mode & 0o777) == "0o600"


@pytest.mark.slow
def test_a_data_edit_rebuilds_the_cache(cache_home: Path, data: Path) -> None:
    build = Counting()
    load_cached(data, build, KnowledgeBase)
    key = cache_key(data)
    gpus = data / "gpus.csv"
    gpus.write_text(gpus.read_text().replace("^Tesla T4$", "^Tesla T4( PCIe)?$"))
    assert cache_key(data) != key
    kb = load_cached(data, build, KnowledgeBase)
    assert build.calls == 2
    assert kb.gpu("Tesla T4 PCIe") is not None
    assert (
        load_cached(data, build, KnowledgeBase).gpu("Tesla T4 PCIe") is not None
        and build.calls == 2
    )


def test_a_broken_edit_is_an_error_whatever_the_cache_holds(cache_home: Path, data: Path) -> None:
    load_cached(data, Counting(), KnowledgeBase)
    gpus = data / "gpus.csv"
    gpus.write_text(gpus.read_text() + "Broken,^X$,8.0\n")
    with pytest.raises(KnowledgeError, match="wrong number of columns"):
        load_cached(data, Counting(), KnowledgeBase)


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2]),
        lambda path: path.write_bytes(b"not a cache at all"),
        lambda path: path.write_bytes(path.read_bytes().replace(b"vllm-triage", b"other-tool", 1)),
    ],
    ids=["truncated", "garbage", "foreign header"],
)
@pytest.mark.slow
def test_a_damaged_cache_is_rebuilt(cache_home: Path, data: Path, damage) -> None:
    build = Counting()
    load_cached(data, build, KnowledgeBase)
    damage(_cache_file(cache_home))
    assert load_cached(data, build, KnowledgeBase) == _load(data)
    assert build.calls == 2
    load_cached(data, build, KnowledgeBase)
    assert build.calls == 2  # rewritten whole


class _Planted:
    """A pickle that, when loaded, leaves a mark: what an attacker would put in a cache."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.mkdir, (str(self.mark),))


def _plant(path: Path, mark: Path, key: str) -> None:
    payload = pickle.dumps(_Planted(mark))
    digest = hashlib.sha256(payload).hexdigest().encode()
    path.write_bytes(b"vllm-triage cache 2\n" + key.encode() + b"\n" + digest + b"\n" + payload)


@pytest.mark.slow
def test_a_cache_whose_key_does_not_match_is_never_unpickled(
    cache_home: Path, data: Path, tmp_path: Path
) -> None:
    load_cached(data, Counting(), KnowledgeBase)
    mark = tmp_path / "unpickled"
    _plant(_cache_file(cache_home), mark, "0" * 64)
    build = Counting()
    load_cached(data, build, KnowledgeBase)
    assert build.calls == 1 and not mark.exists()


@pytest.mark.parametrize("target", ["folder", "file"])
@pytest.mark.slow
def test_a_cache_others_may_write_is_not_trusted(
    cache_home: Path, data: Path, tmp_path: Path, target: str
) -> None:
    load_cached(data, Counting(), KnowledgeBase)
    path = _cache_file(cache_home)
    mark = tmp_path / "unpickled"
    _plant(path, mark, cache_key(data))  # the right key: only the permissions stand in the way
    (cache_home if target == "folder" else path).chmod(0o777 if target == "folder" else 0o666)
    build = Counting()
    assert load_cached(data, build, KnowledgeBase) == _load(data)
    assert build.calls == 1 and not mark.exists()


@pytest.mark.slow
def test_a_symbolic_link_in_place_of_the_cache_is_not_followed(
    cache_home: Path, data: Path, tmp_path: Path
) -> None:
    load_cached(data, Counting(), KnowledgeBase)
    path = _cache_file(cache_home)
    elsewhere = tmp_path / "elsewhere.pickle"
    mark = tmp_path / "unpickled"
    _plant(elsewhere, mark, cache_key(data))
    path.unlink()
    path.symlink_to(elsewhere)
    build = Counting()
    load_cached(data, build, KnowledgeBase)
    assert build.calls == 1 and not mark.exists()


@pytest.mark.slow
def test_a_cache_folder_that_cannot_be_made_means_validating(
    tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    build = Counting()
    assert load_cached(data, build, KnowledgeBase) == load_cached(data, build, KnowledgeBase)
    assert build.calls == 2


@pytest.mark.slow
def test_a_command_start_reads_no_knowledge_file_from_a_warm_cache(tmp_path: Path) -> None:
    """In a fresh process with a warm cache, the packaged knowledge loads without reading YAML,
    compiling RE2 or validating (unpickling skips the classes' checks, which compile every pattern
    with RE2), and without pydantic."""
    probe = (
        "import sys; from vllm_triage.knowledge import load_knowledge; kb = load_knowledge(); "
        "print(len(kb.signatures), 'pydantic' in sys.modules, "
        "sorted(m for m in ('yaml', 're2') if m in sys.modules))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
        )
        return done.stdout.strip()

    count = len(load_knowledge(cached=False).signatures)
    assert run() == f"{count} False ['re2', 'yaml']"  # cold: validated, then cached
    assert run() == f"{count} False []"  # warm: nothing validated


def test_a_cache_restored_in_one_thread_skips_no_check_in_another() -> None:
    """Unpickling skips the checks only for what it rebuilds: a Struct validated in another
    thread meanwhile is still checked."""
    import threading

    from vllm_triage.knowledge import schema

    restoring = threading.Event()
    done = threading.Event()

    def hold_a_restore() -> None:
        schema._restoring.active = True
        restoring.set()
        done.wait(timeout=10)
        schema._restoring.active = False

    holder = threading.Thread(target=hold_a_restore)
    holder.start()
    try:
        assert restoring.wait(timeout=10)
        with pytest.raises(ValueError, match="grep -E lacks"):
            schema.Milestone(id="m", phase="unknown", patterns=[r"\d+ lazy"])
    finally:
        done.set()
        holder.join()


def test_a_temporary_left_by_a_killed_run_does_not_block_the_cache(
    cache_home: Path, data: Path
) -> None:
    """A run killed half-way leaves its temporary; the next run (in a container often under the
    same pid) still writes the cache."""
    cache_home.mkdir(parents=True, mode=0o700)
    name = _file_name(data)
    for left in (f".{name}.{os.getpid()}.{threading.get_ident()}.tmp", f".{name}.0.0.tmp"):
        (cache_home / left).write_bytes(b"torn")
    load_cached(data, Counting(), KnowledgeBase)
    assert read_cached(_cache_file(cache_home).name, cache_key(data), 1 << 30) is not None


@pytest.mark.slow
def test_processes_building_a_cold_cache_at_once_all_load_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six commands released together on an empty cache folder each build the knowledge base
    and write the cache at once: all succeed, and one whole cache file is left, no temporary."""
    from test_case_concurrency import run_together

    compat = ["compat", "--driver", "580.65.06", "--cuda", "13.0", "--format", "json"]
    cache = tmp_path / "cache"
    results = run_together([compat] * 6, tmp_path, cache)
    assert results == [(0, "")] * 6, results
    folder = cache / CACHE_FOLDER_NAME
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert read_cached(_cache_file(folder).name, cache_key(DATA_DIR), 1 << 30) is not None
    assert [p.name for p in folder.glob(".*.tmp")] == []
