"""The message catalogue (issue 21): scripts/message_catalogue.py's extraction on a small package
it never downloads, the data files it wrote (schema, determinism, size), and the coverage that
`knowledge check` prints, on a tiny catalogue and corpus."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

from vllm_triage.knowledge import DATA_DIR, KnowledgeError, load_knowledge
from vllm_triage.knowledge.cache import cache_key
from vllm_triage.knowledge.messages import (
    PatternRef,
    coverage,
    coverage_table,
    load_catalogues,
    message_lines,
    unmatched_anywhere,
)
from vllm_triage.knowledge.schema import CatalogueMessage, MessageCatalogue
from vllm_triage.ties import catalogue_check

REPO = Path(__file__).parent.parent
SCRIPT = REPO / "scripts" / "message_catalogue.py"
MESSAGES = DATA_DIR / "messages"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("message_catalogue", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    return module


mc = _load_script()

PYTHON_SOURCE = """
import logging
import warnings

logger = logging.getLogger(__name__)
_NO_GPU = "No CUDA GPUs are available on this host"


def start(path, err, size):
    if not path:
        raise ValueError("The model path does not exist or is not a folder")
    if err:
        raise RuntimeError(f"CUDA error: {err} while initialising the device") from None
    if size:
        msg = "tensor_parallel_size {} must divide the number of attention heads".format(size)
        raise ValueError(msg)
    logger.error("NCCL communicator failed to initialise: %s (rank %d)", err, 3)
    logger.info("Loading weights took %.2f s", 1.0)
    warnings.warn("--foo is deprecated and will be removed in a future release", DeprecationWarning)
    raise RuntimeError(_NO_GPU)
"""
C_SOURCE = r"""
static bool load(const char * path) {
    // LLAMA_LOG_ERROR("commented out: never a message\n");
    if (!ok) {
        LLAMA_LOG_ERROR("%s: failed to load model from %s\n", __func__, path);
        throw std::runtime_error(format("invalid magic characters: '%s', expected 'GGUF'", magic));
    }
    fprintf(stdout, "not an error stream: %s\n", path);
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor, got device ", x.device());
    return true;
}
"""
NATIVE = (
    b"\x7fELF\x02\x01\x00\x00cudaErrorNoDevice\x00no CUDA-capable device is detected\x00"
    b"_ZN3c104cuda9GetDeviceEv\x00random bytes\x01\x02\x03\x00"
    b"NCCL failed to open the communicator: %s (error %d)\x00"
    b"a string with nothing alarming at all in it\x00"
)
PRODUCER = mc.Producer(
    "demo-producer",
    ("1.0", "2.0"),
    native=(r"^demo/lib/.*\.so$",),
    c_sources=(r"^demo/csrc/",),
)


def _tree(root: Path, version: str) -> Path:
    (root / "demo" / "lib").mkdir(parents=True)
    (root / "demo" / "csrc").mkdir()
    (root / "demo" / "tests").mkdir()
    source = (
        PYTHON_SOURCE if version == "2.0" else PYTHON_SOURCE.replace("CUDA error", "CUDA failure")
    )
    (root / "demo" / "engine.py").write_text(source, encoding="utf-8")
    (root / "demo" / "tests" / "test_engine.py").write_text(
        'raise ValueError("a message in a test is not catalogued at all")\n', encoding="utf-8"
    )
    (root / "demo" / "csrc" / "model.cpp").write_text(C_SOURCE, encoding="utf-8")
    (root / "demo" / "lib" / "libdemo.so").write_bytes(NATIVE)
    return root


def _found(tmp_path: Path, version: str = "2.0") -> list:
    tree = _tree(tmp_path / version, version)
    return mc.extract_folder(PRODUCER, version, tree).found


def test_python_raises_fstrings_and_log_calls_are_extracted(tmp_path: Path) -> None:
    found = {(f.message, f.kind, f.exception, f.level) for f in _found(tmp_path)}
    assert ("The model path does not exist or is not a folder", "raise", "ValueError", "") in found
    assert (
        "CUDA error: {} while initialising the device",
        "raise",
        "RuntimeError",
        "",
    ) in found
    # a name assigned earlier in the function, and one of the module
    assert (
        "tensor_parallel_size {} must divide the number of attention heads",
        "raise",
        "ValueError",
        "",
    ) in found
    assert ("No CUDA GPUs are available on this host", "raise", "RuntimeError", "") in found
    assert ("NCCL communicator failed to initialise: {} (rank {})", "log", "", "error") in found
    assert (
        "--foo is deprecated and will be removed in a future release",
        "log",
        "DeprecationWarning",
        "warning",
    ) in found
    messages = {f.message for f in _found(tmp_path / "again")}
    assert not any("Loading weights" in m for m in messages)  # info is no failure
    assert not any("in a test" in m for m in messages)  # tests are left out


def test_c_sources_and_native_strings_are_extracted(tmp_path: Path) -> None:
    found = {(f.message, f.kind, f.exception, f.level, f.file) for f in _found(tmp_path)}
    cpp, so = "demo/csrc/model.cpp", "demo/lib/libdemo.so"
    assert ("{}: failed to load model from {}\n", "log", "", "error", cpp) in found
    assert (
        "invalid magic characters: '{}', expected 'GGUF'",
        "raise",
        "std::runtime_error",
        "",
        cpp,
    ) in found
    assert ("input must be a CUDA tensor, got device {}", "raise", "c10::Error", "", cpp) in found
    assert not any("commented out" in f[0] or "not an error stream" in f[0] for f in found)
    native = {f[0] for f in found if f[1] == "native" and f[4] == so}
    assert native == {
        "cudaErrorNoDevice",
        "no CUDA-capable device is detected",  # the message after an error code's name
        "NCCL failed to open the communicator: {} (error {})",
    }


def test_the_native_filter_is_documented_and_bounded() -> None:
    assert mc.native_filter("CUDA driver version is insufficient for CUDA runtime version")
    assert mc.native_filter("CUDA_ERROR_NO_DEVICE")
    assert not mc.native_filter("_ZN3c104cuda9GetDeviceEv failed")
    assert not mc.native_filter("/usr/lib/x86_64/libcuda/failed")
    assert not mc.native_filter("error " * 80)  # longer than NATIVE_MAX
    assert not mc.native_filter("a plain sentence with nothing alarming in it")


def test_a_wheel_reads_as_its_unpacked_tree(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", "2.0")
    wheel = tmp_path / "demo-2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as handle:
        for path in sorted(tree.rglob("*")):
            if path.is_file():
                handle.write(path, path.relative_to(tree).as_posix())
    from_wheel = mc.extract_archive(PRODUCER, "2.0", wheel).found
    from_tree = mc.extract_folder(PRODUCER, "2.0", tree).found
    assert sorted(set(from_wheel)) == sorted(set(from_tree))


def _build(tmp_path: Path, reverse: bool = False) -> Path:
    extractions = [
        mc.extract_folder(PRODUCER, version, _tree(tmp_path / f"t{version}-{reverse}", version))
        for version in PRODUCER.versions
    ]
    if reverse:
        extractions.reverse()
        for extraction in extractions:
            extraction.found.reverse()
    out = tmp_path / f"out-{reverse}" / "messages"
    mc.build({PRODUCER.name: extractions}, [PRODUCER], out, "2026-12-02")
    return out


def test_the_catalogue_is_deterministic_and_valid(tmp_path: Path) -> None:
    out = _build(tmp_path)
    again = _build(tmp_path, reverse=True)
    text = (out / "demo-producer.yaml").read_text(encoding="utf-8")
    assert text == (again / "demo-producer.yaml").read_text(encoding="utf-8")
    (catalogue,) = load_catalogues(out.parent)
    assert catalogue.producer == "demo-producer"
    assert catalogue.source == [
        "https://pypi.org/project/demo-producer/1.0/",
        "https://pypi.org/project/demo-producer/2.0/",
    ]
    by_text = {entry.message: entry for entry in catalogue.messages}
    # versions merged: a message of both releases, one of the newer only, one of the older only
    assert by_text["The model path does not exist or is not a folder"].versions == ["1.0", "2.0"]
    assert by_text["CUDA error: {} while initialising the device"].versions == ["2.0"]
    assert by_text["CUDA failure: {} while initialising the device"].versions == ["1.0"]
    nccl = by_text["NCCL communicator failed to initialise: {} (rank {})"]
    assert (nccl.family, nccl.cause, nccl.level) == ("distributed", "nccl_or_network", "error")
    assert by_text["No CUDA GPUs are available on this host"].cause == "no_gpu_visible"
    deprecated = by_text["--foo is deprecated and will be removed in a future release"]
    assert deprecated.cause == "not_a_cause" and not deprecated.is_error
    assert by_text["cudaErrorNoDevice"].kind == "native"
    keys = [(e.family, e.message.lower(), e.message) for e in catalogue.messages]
    assert keys == sorted(keys)


def test_classification_rules() -> None:
    assert mc.classify("The NVIDIA driver on your system is too old (found version {})", "") == (
        "cuda_init",
        "driver_too_old",
    )
    assert mc.classify("CUDA out of memory. Tried to allocate {} GiB", "OutOfMemoryError") == (
        "gpu_memory",
        "",
    )
    assert mc.classify("No module named 'flash_attn'", "ModuleNotFoundError") == (
        "dependency",
        "dependency_mismatch",
    )
    assert mc.classify("Cannot use chat template functions because none was given", "") == (
        "chat_template",
        "chat_template",
    )
    assert mc.classify("The weather is fine today, nothing to see", "") is None
    assert mc.too_generic("Error: {}")
    assert mc.too_generic("{} {} {}")
    assert not mc.too_generic("cudaErrorInsufficientDriver")


def _entry(message: str, **fields: object) -> dict[str, object]:
    return {
        "message": message,
        "kind": "raise",
        "exception": "RuntimeError",
        "file": "demo/x.py",
        "versions": ["1.0"],
        "family": "cuda_init",
        "cause": "",
        **fields,
    }


def _catalogue(producer: str, *entries: dict[str, object]) -> MessageCatalogue:
    return msgspec.convert(
        {
            "producer": producer,
            "source": [f"https://pypi.org/project/{producer}/1.0/"],
            "as_of": "2026-12-02",
            "certainty": "primary",
            "versions": ["1.0"],
            "method": "a test",
            "messages": list(entries),
        },
        MessageCatalogue,
        strict=False,
    )


def test_the_schema_refuses_what_a_catalogue_cannot_hold() -> None:
    for bad in (
        _entry("a raise without its class here", exception=""),
        _entry("a native string with a level", kind="native", exception="", level="error"),
        _entry("a log call without its level", kind="log", exception=""),
        _entry("unknown family for this entry", family="weather"),
        _entry("a cause outside the vocabulary", cause="bad_luck"),
        _entry("short"),
    ):
        with pytest.raises((msgspec.ValidationError, ValueError)):
            _catalogue("demo", bad)
    with pytest.raises((msgspec.ValidationError, ValueError), match="twice"):
        _catalogue(
            "demo", _entry("the same message twice here"), _entry("the same message twice here")
        )
    with pytest.raises((msgspec.ValidationError, ValueError), match="unknown version"):
        _catalogue("demo", _entry("a message of a release not read", versions=["9.9"]))


def test_message_lines_read_placeholders_and_the_traceback_form() -> None:
    entry = msgspec.convert(_entry("found version {} of the driver\nsecond line"), CatalogueMessage)
    lines = message_lines(entry)
    assert "RuntimeError: found version {} of the driver" in lines
    assert "found version 0 of the driver" in lines and "second line" in lines


def test_coverage_on_a_tiny_catalogue() -> None:
    refs = [
        PatternRef("VT001", "driver", "data/signatures/a.yaml", "driver on your system is too old"),
        PatternRef("VT002", "oom", "data/signatures/a.yaml", "CUDA out of memory"),
        PatternRef("VT003", "never", "data/signatures/a.yaml", "words nobody prints"),
        PatternRef("VT004", "corpus", "data/signatures/a.yaml", "only in a corpus line"),
        PatternRef("VT005", "version", "data/signatures/a.yaml", "found version [0-9]+"),
        PatternRef("VT999", "any", "data/signatures/a.yaml", "RuntimeError: ", names_cause=False),
    ]
    torch = _catalogue(
        "torch",
        _entry("The NVIDIA driver on your system is too old (found version {})"),
        _entry("CUDA out of memory. Tried to allocate {}", family="gpu_memory"),
        _entry("an unmatched error message of torch", family="config"),
        _entry(
            "CUDA out of memory, a warning only",
            kind="log",
            exception="",
            level="warning",
            family="gpu_memory",
        ),
    )
    nccl = _catalogue("nccl", _entry("an advice that is not a cause", cause="not_a_cause"))
    result = coverage(refs, [torch, nccl])
    rows = {row.producer: row for row in result.producers}
    assert (rows["torch"].messages, rows["torch"].errors, rows["torch"].matched) == (4, 3, 2)
    assert rows["torch"].share == pytest.approx(2 / 3)
    assert (rows["nccl"].errors, rows["nccl"].share) == (0, 0.0)
    assert [ref.signature for ref in result.unmatched] == ["VT003", "VT004"]
    left = unmatched_anywhere(result.unmatched, ["INFO: only in a corpus line here"])
    assert [ref.signature for ref in left] == ["VT003"]
    table = coverage_table(result, "data/messages")
    assert len(table) == 5 and "66.7%" in table[2] and table[-1].split()[0] == "all"


def test_an_example_that_is_an_instance_of_a_message_grounds_its_pattern() -> None:
    """A producer that fills a value in at run time ("Insufficient {}") prints wording no
    placeholder reading shows; the signature's real example line is an instance of it."""
    scheduler = _catalogue(
        "kubernetes",
        _entry("{}/{} nodes are available: {} Insufficient {}.", family="platform"),
    )
    event = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    refs = [
        PatternRef("VT001", "gpu", "a.yaml", "[Ii]nsufficient nvidia[.]com/gpu", examples=(event,)),
        PatternRef("VT002", "bare", "a.yaml", "[Ii]nsufficient nvidia[.]com/gpu"),
        PatternRef(
            "VT003", "other", "a.yaml", "Insufficient memory", examples=("Insufficient memory",)
        ),
    ]
    result = coverage(refs, [scheduler])
    assert [ref.signature for ref in result.unmatched] == ["VT002", "VT003"]
    assert result.producers[0].matched == 1


@pytest.fixture
def tiny_data(tmp_path: Path) -> Path:
    """The packaged knowledge with a catalogue of two messages instead of the real one."""
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data, ignore=shutil.ignore_patterns("messages"))
    (data / "messages").mkdir()
    text = (
        'producer: "torch"\nas_of: "2026-12-02"\ncertainty: primary\n'
        'source: ["https://pypi.org/project/torch/2.9.1/"]\nversions: ["2.9.1"]\n'
        'method: "a test"\nmessages:\n'
        '  - {message: "The NVIDIA driver on your system is too old (found version {})", '
        'kind: raise, exception: RuntimeError, file: "torch/cuda/__init__.py", '
        'versions: ["2.9.1"], family: cuda_init, cause: driver_too_old}\n'
        '  - {message: "an error message no signature knows", kind: native, '
        'file: "torch/lib/libc10_cuda.so", versions: ["2.9.1"], family: cuda_init, cause: ""}\n'
    )
    (data / "messages" / "torch.yaml").write_text(text, encoding="utf-8")
    return data


def test_catalogue_check_warns_of_patterns_matching_nothing(tiny_data: Path, tmp_path: Path):
    kb = load_knowledge(tiny_data)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.log").write_text(
        "2026-01-01T00:00:00Z ERROR 01-01 00:00:00 [x.py:1] CUDA out of memory. Tried\n",
        encoding="utf-8",
    )
    report = catalogue_check(kb, [corpus])
    assert report.table[2].split()[:6] == ["torch", "1", "2", "2", "1", "50.0%"]
    flagged = " ".join(report.unmatched)
    assert "driver on your system is too old" not in flagged  # a catalogued message
    assert "'CUDA out of memory'" not in flagged  # a corpus line
    assert all(w.startswith("data/signatures/") for w in report.unmatched)
    assert all(w.endswith("and no corpus log line") for w in report.unmatched)
    assert len(report.unmatched) < sum(len(s.patterns) for s in kb.signatures)
    catalogue_only = catalogue_check(kb)
    assert "CUDA out of memory" in " ".join(catalogue_only.unmatched)  # no corpus line now
    assert catalogue_only.table == report.table


def test_commands_never_read_the_catalogue(tiny_data: Path) -> None:
    key = cache_key(tiny_data)
    (tiny_data / "messages" / "torch.yaml").write_text("not: [valid", encoding="utf-8")
    assert cache_key(tiny_data) == key  # not part of the cached knowledge's key
    kb = load_knowledge(tiny_data)  # loads: the catalogue is read only where asked for
    assert not any(name.startswith("data/messages") for name in kb.files)
    with pytest.raises(KnowledgeError, match=r"messages/torch\.yaml"):
        load_catalogues(tiny_data)


# --- the packaged catalogue ----------------------------------------------------------------------


def test_the_packaged_catalogue_is_valid_bounded_and_regenerates_byte_for_byte() -> None:
    files = sorted(MESSAGES.glob("*.yaml"))
    assert files, "run scripts/message_catalogue.py"
    assert sum(path.stat().st_size for path in files) < 5 << 20
    catalogues = load_catalogues(DATA_DIR)
    producers = {producer.name: producer for producer in mc.PRODUCERS}
    for path, catalogue in zip(files, catalogues, strict=True):
        producer = producers[catalogue.producer]
        assert catalogue.versions == [v for v in producer.versions if v in catalogue.versions]
        assert 0 < len(catalogue.messages) <= mc.MAX_PER_PRODUCER
        entries = [
            mc.Entry(
                e.message,
                e.kind,
                e.exception,
                e.level or "",
                e.file,
                e.versions,
                e.family,
                e.cause,
            )
            for e in catalogue.messages
        ]
        for entry in entries:
            assert not mc.too_generic(entry.message), entry.message
            placed = mc.place(producer, entry.message, entry.exception)
            assert placed == (entry.family, entry.cause), entry.message
        rendered = mc.render_yaml(producer, catalogue.versions, entries, str(catalogue.as_of))
        assert rendered == path.read_text(encoding="utf-8"), path.name


@pytest.mark.slow
def test_cli_knowledge_check_prints_the_coverage_table() -> None:
    from cli import run_cli

    done = run_cli("knowledge", "check")
    assert done.exit_code == 0 and done.stdout.startswith("ok:")
    table = done.stdout.splitlines()[1:]
    assert table[0].startswith("message catalogue (data/messages)")
    producers = {line.split()[0] for line in table[2:]}
    assert {"vllm", "torch", "nvidia-nccl-cu12", "all"} <= producers
    catalogues = list(
        (Path(__file__).parent.parent / "src/vllm_triage/knowledge/data/messages").glob("*.yaml")
    )
    assert len(table) == 3 + len(catalogues)  # title, header, a row per producer, the total
    assert done.stderr == ""
    corpus = Path(__file__).parent / "data" / "corpus" / "logs"
    listed = run_cli("knowledge", "check", "--unmatched", "--corpus", str(corpus))
    assert listed.exit_code == 0
    lines = listed.stdout.splitlines()[len(done.stdout.splitlines()) :]
    assert lines and all(line.endswith("and no corpus log line") for line in lines)
    alone = run_cli("knowledge", "check", "--unmatched")
    assert len(alone.stdout.splitlines()) > len(listed.stdout.splitlines())
    missing = run_cli("knowledge", "check", "--corpus", str(corpus / "absent"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


@pytest.mark.slow
def test_every_signature_pattern_is_worded_by_a_producer_or_a_real_log() -> None:
    """Issue 21: a rule is grounded in the programs that print its message or in real reports;
    `knowledge check` with the development corpus fails on a pattern grounded in neither."""
    from cli import run_cli

    data = Path(__file__).parent / "data"
    # the labelled corpus, the real CPU server's log (data/*.log), and the wording witnesses
    # (real log lines of public threads for wording no catalogued producer prints)
    folders = [str(data)] + [
        str(data / name / "logs")
        for name in ("corpus", "corpus-incoming", "corpus-runs", "wording")
    ]
    done = run_cli("knowledge", "check", *[arg for f in folders for arg in ("--corpus", f)])
    assert done.exit_code == 0, done.stdout.splitlines()[-20:]


@pytest.mark.slow
def test_knowledge_check_lists_what_a_signature_covers() -> None:
    from cli import run_cli

    done = run_cli("knowledge", "check", "--covers", "cuda-out-of-memory")
    assert done.exit_code == 0
    lines = done.stdout.splitlines()
    assert lines[0].startswith("VT301 cuda-out-of-memory:")
    assert "  pattern 'CUDA out of memory': " in done.stdout
    assert any(
        line.startswith("    torch torch/lib/libc10_cuda.so") and "Tried to allocate" in line
        for line in lines
    )
    missing = run_cli("knowledge", "check", "--covers", "VT000")
    assert missing.exit_code == 2 and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "no signature 'VT000'" in missing.stderr


def test_each_wording_witness_shows_its_pattern() -> None:
    """tests/data/wording: every row names a log of the folder, a URL, and a pattern of that
    signature which matches a line of that log as the scanner reads it; every log has a row."""
    import csv

    from vllm_triage.diagnose.logreader import normalize
    from vllm_triage.knowledge import load_knowledge

    folder = Path(__file__).parent / "data" / "wording"
    kb = load_knowledge(cached=False)
    with (folder / "sources.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows
    for row in rows:
        signature = kb.signature(row["signature"].split()[0])
        assert signature is not None and row["pattern"] in signature.patterns, row
        assert row["source_url"].startswith("https://github.com/"), row
        text = (folder / row["file"]).read_bytes()
        lines = [normalize(raw, n).message for n, raw in enumerate(text.split(b"\n"), 1)]
        assert any(re.search(row["pattern"], line) for line in lines), row
    assert {row["file"] for row in rows} == {f"logs/{p.name}" for p in (folder / "logs").iterdir()}
