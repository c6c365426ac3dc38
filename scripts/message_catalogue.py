"""A catalogue of the failure messages a failing LLM server prints, read from their producers.

Most of what a failing vLLM server prints comes from code on PyPI: vLLM itself, PyTorch and its
native libraries, transformers, huggingface_hub, NCCL, the CUDA runtime, and the libraries beside
them. This script downloads a spread of their releases (`pip download --no-deps`, into a cache
outside the repository: ~/.cache/vllm-triage/producers by default, never committed; a release
already there is not downloaded again) and extracts their failure messages:

- Python sources (every `*.py` of a wheel or sdist, tests, examples and benchmarks left out), read
  with `ast`: the text passed to `raise SomeError(...)` (the first positional argument, or a
  `detail=`/`message=`/`msg=` keyword) with the exception class, and the text passed to
  `<logger>.error/exception/critical/fatal/warning/warn/warning_once/error_once/warning_advice`
  (a receiver whose name contains "log") and to `warnings.warn` (with its category) with the
  level. A message is a string constant, an f-string (each `{...}` kept as `{}`), `"..." % args`
  or `"...".format(...)` (each specifier or field as `{}`), a `+` of those (a part that is no
  string as `{}`), `textwrap.dedent(...)` or `.strip()` of one, or a name assigned one of those
  earlier in the same function or module. A logger call with arguments has its %-specifiers as
  `{}` too.
- C, C++ and CUDA sources (llama.cpp inside llama-cpp-python's sdist, triton's driver.c, the CUDA
  sources flashinfer ships for its JIT), read with a small tokenizer that knows string and
  character literals, comments and balanced parentheses: the format string of llama.cpp's and
  ggml's log macros (`*_LOG_ERROR`, `*_LOG_WARN`, `LOG_ERR`, `LOG_WRN`, level error/warning),
  `fprintf(stderr, ...)` (error), `GGML_ABORT`/`die`/`die_fmt` (raise, "abort"),
  `throw std::runtime_error(...)` and other `throw X(...)` (raise, X), `PyErr_SetString` and
  `PyErr_Format` (raise, the Python exception), and the message arguments of `TORCH_CHECK` and
  its kin (raise, c10::Error, ValueError...): adjacent literals joined, any other argument as
  `{}`, printf specifiers as `{}`.
- Native libraries (libc10_cuda.so and libtorch_cuda.so of torch, libnccl.so of
  nvidia-nccl-cu12, libcudart.so of nvidia-cuda-runtime-cu12, the Rust extensions of tokenizers
  and safetensors), read as printable-ASCII runs, streamed in blocks (never loaded whole). A run
  is kept when it looks like an error message (native_filter below): 20 to 400 characters, at
  least three words, mostly letters and spaces, not a path, a C++ symbol or a format table, and
  containing one of the words of NATIVE_WORDS (error, fail, invalid, unsupported, not supported,
  out of memory, not found, mismatch, insufficient, cannot, could not, unable to, too old,
  incompatible, no kernel image, timed out, unavailable, not initialized, denied, busy, or a
  sentence starting with "no ": "No CUDA GPUs are available", or saying "found no"); or it is an
  error code's name as the CUDA and NCCL libraries print it (cudaErrorInsufficientDriver,
  CUDA_ERROR_NO_DEVICE, ncclSystemError). printf specifiers become `{}`.

Some producers are not on PyPI (the NVIDIA container toolkit and libnvidia-container, ollama,
gpustack, text-generation-inference, mistral.rs, kserve, nccl-tests, the NVIDIA device plugin):
REPOSITORY_PRODUCERS names each one's GitHub repository and the commit read (its version). They
are read from a git directory given on the command line (`--repo-dir NAME=GITDIR`, a bare
repository or a clone, NAME the producer or owner/name), with `git ls-tree` and
`git cat-file --batch` at that commit: the script makes no network call of its own, and a
directory that lacks the commit is reported and skipped. Their tests, test data, mocks, docs and
examples are left out (_SKIP_ALWAYS, _SKIP_REPOSITORY), and besides the readers above:

- Go sources, read with the same tokenizer's literals, comments and balanced parentheses: the
  error values (`errors.New`, `fmt.Errorf`, `errors.Wrap(f)`, `status.Error(f)`, `panic`: raise,
  "error" or "panic"), logger calls at Fatal/Panic, Error and Warn levels on a receiver whose
  name contains "log" (`log`, `slog.Error/Warn`, `klog.Errorf/ErrorS/Warningf`, logrus, logr's
  `Error(err, "...")`), and the "error" of a `gin.H{...}` reply. A message is a literal
  (interpreted or raw), a `+` of literals (any other operand as `{}`), `fmt.Sprintf`'s format, or
  a name the file gives one literal (`const X = "..."`); fmt verbs as `{}` (`%q` as `"{}"`).
- Rust sources: thiserror's `#[error("...")]` (raise, the variant or struct it describes),
  `anyhow!`, `bail!`, `ensure!`, `.context("...")` (raise, anyhow::Error), `panic!` and
  `.expect("...")` (raise, panic), and tracing's and log's `error!`/`warn!` (their first literal
  argument); format fields as `{}`.
- C sources with the producer's own error calls (Producer.c_calls: libnvidia-container's
  `error_setx`, nccl-tests' `printf`).

A repository producer's catalogue records its GitHub tree at the commit as its source
(https://github.com/<owner>/<name>/tree/<commit>) and the commit as its version (its tag, where it
has one, in the method line).

Some wording is printed by programs too big to fetch or to read whole, or printed from files no
reader above takes (the Linux kernel's OOM killer, PyTorch's C++ sources, XLA, llama.cpp's CUDA
kernels, CPython's C sources): scripts/cited_wording.yaml cites it, per producer (named as its
GitHub repository is, the schema's rule for a tree URL) its repository and, per file read, the
file's path, the commit it was read at and each message verbatim as that file prints it (a
runtime value, printf or format specifier as `{}`; pieces streamed or concatenated joined as the
readers above join them), with its kind and class or level. The script reads nothing for them:
`extract` turns the file into one extraction per commit, which `build` merges, places and renders
as any other (a message no rule places is left out). A producer the script already reads (a PyPI
project, a repository producer) gets its cited commits as versions after its own; any other name
is a producer of its own (with the default [family, cause] the file may give it, as
Producer.default). Its source is the repository's tree at each cited commit, and its method line
names the files' repository and commits.

Every message is then sorted into a family by the rules of RULES below (first match wins; each
rule is a regular expression over the message, read case-insensitively unless it says otherwise,
or an exception class; a producer's own rules, Producer.rules, place what RULES leave out),
and a family's rule gives the failure class (vllm_triage.vocabulary's
FailureClass) where the message decides it, `not_a_cause` for advice (a deprecation, a
performance hint: the NOT_A_CAUSE expression, over any family), or nothing where the message
alone does not decide it (an out-of-memory error that is oom_at_load or oom_under_load by its
phase). Messages in no family, and messages too generic to be evidence (fewer than MIN_CHARS
characters once the placeholders are removed, or fewer than three words) are left out.

The result is one YAML file per producer under src/vllm_triage/knowledge/data/messages/: a header
(producer, the PyPI release URLs read or the repository's tree at each commit, the date, certainty primary, how it was read) and one entry
per distinct message of the producer (its text, kind raise/log/native, exception class or level,
the file, the versions it appears in, family, cause), sorted by family then text. The output is
deterministic: the same releases give the same bytes (the date is an argument).

Everything is bounded: MAX_SOURCE_BYTES per source file, MAX_FILES per release (or commit of a
repository), MAX_NATIVE_BYTES
per native library, MAX_MESSAGE_CHARS per message, MAX_PER_PRODUCER entries per producer file.

Usage (run with the newest Python at hand: its `ast` reads syntax an older one refuses):
    python3.13 scripts/message_catalogue.py [download|extract|build|all] [--cache DIR]
        [--producer NAME ...] [--date YYYY-MM-DD] [--out DIR] [--repo-dir NAME=GITDIR ...]
e.g. for one repository producer, from a clone:
    git clone https://github.com/ollama/ollama /tmp/ollama
    python3.13 scripts/message_catalogue.py build --producer ollama --repo-dir ollama=/tmp/ollama
The script needs only the standard library, pip (for the downloads) and git (for the
repositories).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import io
import json
import re
import subprocess
import sys
import tarfile
import textwrap
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "src" / "vllm_triage" / "knowledge" / "data" / "messages"
CACHE_DIR = Path.home() / ".cache" / "vllm-triage" / "producers"
# Bump when the extraction changes: each release's extraction is cached under this number.
EXTRACTOR_VERSION = 7

MAX_SOURCE_BYTES = 1 << 20
MAX_FILES = 40_000
MAX_NATIVE_BYTES = 3 << 30
MAX_MESSAGE_CHARS = 400
MAX_PER_RELEASE = 100_000
MAX_PER_PRODUCER = 3_000
MIN_CHARS = 15
NATIVE_MIN, NATIVE_MAX = 20, 400
_BLOCK = 16 << 20


@dataclass(frozen=True)
class Producer:
    """A PyPI project, the releases to read (oldest first), and what of each to read."""

    name: str
    versions: tuple[str, ...]
    sdist: bool = False
    python: bool = True
    # Archive members read as native libraries (printable strings), by regular expression.
    native: tuple[str, ...] = ()
    # Archive members read as C/C++/CUDA sources, by regular expression.
    c_sources: tuple[str, ...] = ()
    # Python members left out, by regular expression (besides tests, examples, benchmarks).
    skip: tuple[str, ...] = ()
    # (family, cause) of a message no rule places: every string of the CUDA runtime is about
    # CUDA, every string of NCCL about its communication.
    default: tuple[str, str] | None = None
    # A producer not on PyPI: its GitHub repository ("owner/name"), read from a git directory
    # (--repo-dir) at the commits of `versions` (each a 40-hex commit), and the tag of each
    # commit where it has one (for the method line only).
    repository: str = ""
    tags: tuple[str, ...] = ()
    # Repository files read as Go and as Rust sources, by regular expression.
    go_sources: tuple[str, ...] = ()
    rust_sources: tuple[str, ...] = ()
    # The producer's own C error calls, besides _C_CALLS: (name, kind, exception or level, index
    # of the format argument).
    c_calls: tuple[tuple[str, str, str, int], ...] = ()
    # The producer's own family rules, (family, cause, words) as a Rule's, for the messages no
    # rule of RULES places (a server's own wording: TGI's shards, ollama's context length).
    rules: tuple[tuple[str, str, str], ...] = ()
    # Wording cited from single files of a public GitHub repository (scripts/cited_wording.yaml):
    # the repository ("owner/name", its name the producer's) and each message as a Cited. Their
    # commits are versions of the producer too (after those it reads itself).
    cited_repository: str = ""
    cited: tuple[Cited, ...] = ()


@dataclass(frozen=True)
class Cited:
    """One message read in one file of a repository at one commit (cited_wording.yaml)."""

    commit: str
    message: str
    kind: str  # raise, log, native
    exception: str
    level: str
    file: str


def cited_commits(producer: Producer) -> tuple[str, ...]:
    """The commits a producer's cited wording was read at, in the order cited_wording.yaml
    names them."""
    return tuple(dict.fromkeys(item.commit for item in producer.cited))


def own_versions(producer: Producer) -> tuple[str, ...]:
    """The versions the producer's own reader reads (its releases or commits), not the cited."""
    cited = set(cited_commits(producer))
    return tuple(v for v in producer.versions if v not in cited)


PRODUCERS: tuple[Producer, ...] = (
    Producer(
        "vllm",
        (
            "0.5.5",
            "0.6.6.post1",
            "0.7.3",
            "0.8.5.post1",
            "0.9.2",
            "0.10.2",
            "0.11.2",
            "0.15.1",
            "0.20.2",
            "0.26.0",
            "0.33.0",
        ),
    ),
    Producer(
        "torch",
        ("2.9.1", "2.14.1"),
        native=(r"^torch/lib/libc10_cuda\.so$", r"^torch/lib/libtorch_cuda\.so$"),
        skip=(r"^torch/testing/", r"^torch/_inductor/", r"^torchgen/", r"^functorch/"),
    ),
    Producer(
        "transformers",
        ("4.45.2", "4.51.3", "4.57.6", "5.0.0", "5.24.0"),
        # one model's own checks, and what a server does not run (pipelines, agents, export)
        skip=(
            r"^transformers/models/(?!auto/)",
            r"^transformers/(pipelines|onnx|commands|agents)/",
        ),
    ),
    Producer("huggingface_hub", ("0.25.2", "0.30.2", "0.36.2", "1.0.1", "2.4.0")),
    Producer("safetensors", ("0.4.5", "0.6.2", "0.8.0"), native=(r"^safetensors/.*\.so$",)),
    Producer("tokenizers", ("0.20.3", "0.22.2", "0.23.3"), native=(r"^tokenizers/.*\.so$",)),
    Producer(
        "ray",
        ("2.40.0", "2.49.2", "2.60.0"),
        skip=(
            r"^ray/(rllib|tune|data|train|air|serve|dashboard|workflow|autoscaler|llm|"
            r"cloudpickle|thirdparty_files|_private/thirdparty|util/(dask|spark|joblib|"
            r"multiprocessing|tracing))/",
        ),
    ),
    Producer(
        "flashinfer-python",
        ("0.5.3", "0.6.6", "0.7.4"),
        # its own bindings (not the CUTLASS, CCCL and kernel trees it ships for its JIT)
        c_sources=(r"^flashinfer/data/csrc/[^/]+\.(cu|cc|cpp)$",),
        skip=(r"^flashinfer/(data|experimental)/", r"/(kernel_src|cute_dsl)/"),
    ),
    Producer("xformers", ("0.0.28.post3", "0.0.31.post1", "0.0.35")),
    Producer("triton", ("3.1.0", "3.4.0", "3.9.0"), c_sources=(r"^triton/backends/.*driver\.c$",)),
    Producer(
        "nvidia-nccl-cu12",
        ("2.21.5", "2.27.3", "2.32.3"),
        python=False,
        native=(r"^nvidia/nccl/lib/libnccl\.so",),
        default=("distributed", "nccl_or_network"),
    ),
    Producer(
        "nvidia-cuda-runtime-cu12",
        ("12.4.127", "12.8.90", "12.9.79"),
        python=False,
        native=(r"^nvidia/cuda_runtime/lib/libcudart\.so",),
        default=("cuda_init", ""),
    ),
    Producer("sglang", ("0.4.6.post5", "0.5.5", "0.5.23")),
    Producer(
        "llama-cpp-python",
        ("0.3.2", "0.3.16", "0.3.36"),
        sdist=True,
        # llama.cpp and ggml's core and CUDA backend, its common code and its server
        c_sources=(
            r"^vendor/llama\.cpp/(src|common|tools/server|examples/server)/",
            r"^vendor/llama\.cpp/ggml/src/(ggml-cuda/|[^/]+$)",
        ),
        skip=(r"^vendor/",),
    ),
)
# Producers not on PyPI, read from their GitHub repositories at one commit each.
REPOSITORY_PRODUCERS: tuple[Producer, ...] = (
    Producer(
        "nvidia-container-toolkit",
        ("d34b3046758cb1a5db606b2a39519c731bbf9f56",),
        python=False,
        repository="NVIDIA/nvidia-container-toolkit",
        # its own code, and the CDI and NVIDIA libraries it vendors (and prints the errors of)
        go_sources=(r"\.go$",),
        skip=(r"^vendor/(?!tags\.cncf\.io/container-device-interface/|github\.com/NVIDIA/)",),
        # the CDI devices a runtime injects are the GPUs of the container
        rules=(("platform", "no_gpu_visible", r"\bCDI devices?\b"),),
    ),
    Producer(
        "libnvidia-container",
        # the commit nvidia-container-toolkit's third_party/libnvidia-container pins
        ("3e428194f8616a81e16834d27365e4a663668533",),
        python=False,
        repository="NVIDIA/libnvidia-container",
        c_sources=(r"^src/",),
        go_sources=(r"^src/nvcgo/",),
        skip=(r"/vendor/",),
        c_calls=(
            ("error_set", "raise", "error", 1),
            ("error_setx", "raise", "error", 1),
            ("errx", "raise", "abort", 1),
            ("warnx", "log", "warning", 0),
            ("log_errf", "log", "error", 0),
            ("log_warnf", "log", "warning", 0),
            ("log_err", "log", "error", 0),
            ("log_warn", "log", "warning", 0),
        ),
        rules=(
            ("cuda_init", "driver_too_old", r"unsatisfied condition: (cuda|driver)"),
            (
                "platform",
                "no_gpu_visible",
                r"driver not loaded|nvml error|initialization error|detection error|device error|"
                r"no adapters (were )?found",
            ),
        ),
    ),
    Producer(
        "ollama",
        ("fb30760996871fa9460115c753afd2c60d4ab0f7",),
        python=False,
        repository="ollama/ollama",
        tags=("v0.33.0-rc2",),
        go_sources=(r"\.go$",),
        skip=(r"^(app|integration)/",),
        rules=(
            ("config", "", r"context length|truncat"),
            ("model_loading", "model_path_or_access", r"try pulling it first|pull model manifest"),
            ("platform", "no_gpu_visible", r"compatible gpus|gpus? (were |was )?discovered"),
        ),
    ),
    Producer(
        "gpustack",
        ("47277d79f4a5bae12a2d25e9ecbed2a2177a5f2d",),
        repository="gpustack/gpustack",
        skip=(r"^(hack|ui)/",),
        rules=(("model_loading", "model_arch_unsupported", r"unsupported model type"),),
    ),
    Producer(
        "text-generation-inference",
        ("db931fcf42da018a3657580c64bf2720f167f9ab",),
        repository="huggingface/text-generation-inference",
        # the router, the launcher and the backends' Rust; the Python server
        rust_sources=(r"^(router|launcher|backends)/",),
        skip=(
            r"^(?!server/text_generation_server/|router/|launcher/|backends/)",
            r"^backends/[^/]+/.*\.py$",
        ),
        rules=(
            # a shard is one process of the model, one per GPU
            ("distributed", "", r"\bshards?\b"),
            ("config", "", r"max_new_tokens|max_total_tokens|max_input_(tokens|length)|`inputs`"),
            ("model_loading", "model_arch_unsupported", r"unsupported model type"),
        ),
    ),
    Producer(
        "mistral.rs",
        ("9e922623f24b32d41f3892b74f0eed18707f4e6c",),
        python=False,
        repository="EricLBuehler/mistral.rs",
        rust_sources=(r"\.rs$",),
        rules=(("model_loading", "model_arch_unsupported", r"unsupported model type"),),
    ),
    Producer(
        "kserve",
        ("aaac4e294dae2c7b1aa1886447793f3aa1c30912",),
        repository="kserve/kserve",
        go_sources=(r"^(pkg|cmd)/",),
        skip=(r"^(hack|test|docs|tools|qpext)/", r"^pkg/client/"),
    ),
    Producer(
        "nccl-tests",
        ("a0b82b2260cf5152b9f8c061bbf7eaf0ba096432",),
        python=False,
        repository="NVIDIA/nccl-tests",
        tags=("v2.19.6",),
        c_sources=(r"^(src|verifiable)/",),
        c_calls=(("printf", "log", "error", 0),),
        default=("distributed", "nccl_or_network"),
    ),
    Producer(
        "k8s-device-plugin",
        ("1b826acc6af3079d8923bac395c3124b8861a9a6",),
        python=False,
        repository="NVIDIA/k8s-device-plugin",
        tags=("v0.20.0",),
        # its own code and the NVIDIA libraries it vendors
        go_sources=(r"\.go$",),
        skip=(r"^vendor/(?!github\.com/NVIDIA/)",),
    ),
)
PRODUCERS += REPOSITORY_PRODUCERS

# --- cited wording -------------------------------------------------------------------------------

CITED_FILE = Path(__file__).resolve().parent / "cited_wording.yaml"
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_CITED_LEVELS = ("critical", "error", "exception", "warning")


CitedProducer = tuple[str, tuple["Cited", ...], tuple[str, str] | None]


def load_cited(path: Path) -> dict[str, CitedProducer]:
    """cited_wording.yaml: by producer, the repository, the messages cited from its files and
    the default (family, cause) of a producer of its own, if any (ValueError for an entry the
    catalogue cannot hold). The file is YAML in JSON's flow form (a JSON document is YAML),
    read with json once its `#` comment lines are dropped, so that the script needs no YAML
    library."""
    if not path.is_file():
        return {}
    text = "\n".join(
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("#")
    )
    document = json.loads(text)
    out: dict[str, CitedProducer] = {}
    for block in document["producers"]:
        name, repository = block["producer"], block["repository"]
        where = f"{path.name}: {name}"
        if not _REPOSITORY.match(repository) or repository.split("/")[1].lower() != name.lower():
            raise ValueError(f"{where}: repository {repository!r} is not owner/{name}")
        if name in out:
            raise ValueError(f"{where}: listed twice")
        items: list[Cited] = []
        for group in block["files"]:
            commit, file = group["commit"], group["file"]
            if not _COMMIT.match(commit):
                raise ValueError(f"{where}: {file}: commit {commit!r} is not 40 hex digits")
            for entry in group["messages"]:
                kind = entry["kind"]
                exception, level = entry.get("exception", ""), entry.get("level", "")
                if kind == "raise" and (not exception or level):
                    raise ValueError(f"{where}: {entry['message']!r}: a raise names its class")
                if kind == "log" and (level not in _CITED_LEVELS or exception):
                    raise ValueError(f"{where}: {entry['message']!r}: a log call names its level")
                if kind == "native" and (exception or level):
                    raise ValueError(f"{where}: {entry['message']!r}: a native string is bare")
                if kind not in _KIND_ORDER:
                    raise ValueError(f"{where}: {entry['message']!r}: unknown kind {kind!r}")
                items.append(Cited(commit, entry["message"], kind, exception, level, file))
        default = block.get("default")
        if default is not None and (
            len(default) != 2 or not all(isinstance(d, str) for d in default)
        ):
            raise ValueError(f"{where}: default is [family, cause]")
        out[name] = (repository, tuple(items), (default[0], default[1]) if default else None)
    return out


def with_cited(
    producers: tuple[Producer, ...], cited: dict[str, CitedProducer]
) -> tuple[Producer, ...]:
    """The producers with their cited wording: a producer the script reads already gets it (its
    versions followed by the cited commits; its own default stands), any other name becomes a
    producer of its own (with the default cited_wording.yaml names, if any)."""
    out: list[Producer] = []
    for producer in producers:
        if producer.name in cited:
            repository, items, default = cited[producer.name]
            if default is not None:
                raise ValueError(f"{producer.name}: a producer the script reads has its default")
            if producer.repository and producer.repository != repository:
                raise ValueError(f"{producer.name}: cited from {repository}, not its repository")
            commits = tuple(dict.fromkeys(item.commit for item in items))
            versions = producer.versions + tuple(c for c in commits if c not in producer.versions)
            producer = replace(
                producer, versions=versions, cited_repository=repository, cited=items
            )
        out.append(producer)
    known = {producer.name for producer in producers}
    for name, (repository, items, default) in cited.items():
        if name not in known:
            commits = tuple(dict.fromkeys(item.commit for item in items))
            out.append(
                Producer(
                    name,
                    commits,
                    python=False,
                    default=default,
                    cited_repository=repository,
                    cited=items,
                )
            )
    return tuple(out)


def cited_extractions(producer: Producer) -> list[Extraction]:
    """The producer's cited wording, one extraction per commit (nothing read: the file lists
    it)."""
    out = []
    for commit in cited_commits(producer):
        items = [item for item in producer.cited if item.commit == commit]
        found = sorted({Found(i.message, i.kind, i.exception, i.level, i.file) for i in items})
        out.append(Extraction(producer.name, commit, found, len({i.file for i in items})))
    return out


_SKIP_ALWAYS = re.compile(
    r"(^|/)(tests?|testing|examples?|benchmarks?|docs?|third_party|_vendor)/|(^|/)test_[^/]*\.py$"
)
_PLATFORMS = (
    "manylinux_2_39_x86_64",
    "manylinux_2_35_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)


def release_url(producer: str, version: str) -> str:
    return f"https://pypi.org/project/{producer}/{version}/"


def source_url(producer: Producer, version: str) -> str:
    """The page of what was read: a PyPI release, or a repository's tree at a commit (the cited
    repository's, for a commit of cited wording)."""
    if version in cited_commits(producer):
        return f"https://github.com/{producer.cited_repository}/tree/{version}"
    if producer.repository:
        return f"https://github.com/{producer.repository}/tree/{version}"
    return release_url(producer.name, version)


# --- download ------------------------------------------------------------------------------------


def _archive(folder: Path) -> Path | None:
    found = sorted([*folder.glob("*.whl"), *folder.glob("*.tar.gz"), *folder.glob("*.zip")])
    return found[0] if found else None


def download(cache: Path, producers: Iterable[Producer]) -> list[str]:
    """Each release into cache/<producer>/<version>/ (skipped when an archive is there); the
    releases that could not be had, one line each."""
    failed: list[str] = []
    for producer in producers:
        for version in () if producer.repository else own_versions(producer):
            folder = cache / producer.name / version
            if _archive(folder) is not None:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
            command += ["-d", str(folder), f"{producer.name}=={version}"]
            if producer.sdist:
                command += ["--no-binary", ":all:"]
            else:
                command += ["--only-binary", ":all:", "--python-version", "3.12"]
                command += ["--implementation", "cp", "--abi", "cp312", "--abi", "abi3"]
                command += ["--abi", "none"]
                for platform in _PLATFORMS:
                    command += ["--platform", platform]
                command += ["--platform", "any"]
            print(f"download {producer.name} {version}", file=sys.stderr, flush=True)
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0 or _archive(folder) is None:
                tail = (done.stderr.strip().splitlines() or ["no archive"])[-1]
                failed.append(f"{producer.name} {version}: {tail}")
    return failed


# --- archives ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """A file of an archive: its path (the sdist's top folder removed), size, and a reader."""

    path: str
    size: int
    open: Callable[[], io.BufferedIOBase | Any]


def members(archive: Path) -> Iterator[Member]:
    """The regular files of a wheel (zip) or an sdist (tar.gz), in the archive's order."""
    if archive.suffix in {".whl", ".zip"}:
        with zipfile.ZipFile(archive) as handle:
            for info in handle.infolist():
                if not info.is_dir():
                    yield Member(info.filename, info.file_size, lambda i=info: handle.open(i))
        return
    with tarfile.open(archive, "r:*") as handle:
        for tinfo in handle:
            if tinfo.isfile():
                path = tinfo.name.split("/", 1)[1] if "/" in tinfo.name else tinfo.name
                yield Member(path, tinfo.size, lambda t=tinfo: handle.extractfile(t))


# --- messages ------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Found:
    """One message found in one file of one release."""

    message: str
    kind: str  # raise, log, native
    exception: str  # the class raised (raise), the warning category (warnings.warn)
    level: str  # log: critical, error, exception, warning
    file: str


_PRINTF = re.compile(
    r"%(?:[0-9]+\$)?[-+ #0']*(?:[0-9]+|\*)?(?:\.(?:[0-9]+|\*))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?[diouxXeEfFgGaAcspn]"
)
_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_SPACES = re.compile(r"[ \t]+")


def printf_to_braces(text: str) -> str:
    """printf/%-format specifiers as `{}`, `%%` as `%`."""
    parts = text.split("%%")
    return "%".join(_PRINTF.sub("{}", part) for part in parts)


def format_to_braces(text: str) -> str:
    """str.format fields ({name}, {0}, {:.2f}, {x!r}) as `{}`, `{{`/`}}` as one brace."""

    def one(match: re.Match[str]) -> str:
        token = match.group()
        return {"{{": "{", "}}": "}"}.get(token, "{}")

    return _FORMAT_FIELD.sub(one, text)


def clean(text: str) -> str:
    """A message as catalogued: printable, spaces collapsed inside lines, trimmed, bounded."""
    text = "".join(ch if ch.isprintable() or ch == "\n" else " " for ch in text)
    text = text.encode("utf-8", "replace").decode("utf-8")
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    text = "\n".join(line for line in lines if line)
    text = re.sub(r"(\{\}\s*){2,}", "{} ", text).strip()
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1].rstrip() + "…"
    return text


_RAISE_KEYWORDS = ("detail", "message", "msg")
_LOG_LEVELS = {
    "critical": "critical",
    "fatal": "critical",
    "error": "error",
    "error_once": "error",
    "exception": "exception",
    "warning": "warning",
    "warn": "warning",
    "warning_once": "warning",
    "warning_advice": "warning",
    "print_warning_once": "warning",
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    return "?"


class _PythonMessages(ast.NodeVisitor):
    """The raises and log calls of one module, with names resolved in their scopes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Found] = []
        self.scopes: list[dict[str, list[tuple[int, ast.expr]]]] = []

    # scopes: the string assignments of a module or function, by name, in line order
    def _collect(self, body: Iterable[ast.AST]) -> dict[str, list[tuple[int, ast.expr]]]:
        names: dict[str, list[tuple[int, ast.expr]]] = {}
        stack = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                continue
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, []).append((node.lineno, node.value))
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.value is not None
            ):
                names.setdefault(node.target.id, []).append((node.lineno, node.value))
            stack.extend(ast.iter_child_nodes(node))
        for values in names.values():
            values.sort(key=lambda item: item[0])
        return names

    def visit_Module(self, node: ast.Module) -> None:
        self.scopes.append(self._collect(node.body))
        self.generic_visit(node)
        self.scopes.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scopes.append(self._collect(node.body))
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def _resolve(self, name: str, line: int, depth: int) -> str | None:
        for scope in reversed(self.scopes):
            earlier = [value for at, value in scope.get(name, []) if at < line]
            if earlier:
                return self.render(earlier[-1], line, depth + 1)
        return None

    def render(self, node: ast.expr, line: int, depth: int = 0) -> str | None:
        """The text of a string expression, placeholders as `{}`; None for what is no string."""
        if depth > 4:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value)
                else:
                    parts.append("{}")
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.render(node.left, line, depth + 1)
            right = self.render(node.right, line, depth + 1)
            if left is None and right is None:
                return None
            return (left if left is not None else "{}") + (right if right is not None else "{}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self.render(node.left, line, depth + 1)
            return printf_to_braces(left) if left is not None else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr == "format":
                inner = self.render(node.func.value, line, depth + 1)
                return format_to_braces(inner) if inner is not None else None
            if attr in {"strip", "rstrip", "lstrip"} and not node.args:
                inner = self.render(node.func.value, line, depth + 1)
                return inner.strip() if inner is not None else None
            if attr == "dedent" and node.args:
                inner = self.render(node.args[0], line, depth + 1)
                return textwrap.dedent(inner) if inner is not None else None
        if isinstance(node, ast.Call) and _dotted(node.func) == "dedent" and node.args:
            inner = self.render(node.args[0], line, depth + 1)
            return textwrap.dedent(inner) if inner is not None else None
        if isinstance(node, ast.Name):
            return self._resolve(node.id, line, depth)
        return None

    def _add(self, text: str | None, kind: str, exception: str, level: str) -> None:
        if text is not None:
            self.found.append(Found(text, kind, exception, level, self.path))

    def visit_Raise(self, node: ast.Raise) -> None:
        call = node.exc
        if isinstance(call, ast.Call):
            name = _dotted(call.func).rsplit(".", 1)[-1]
            argument: ast.expr | None = call.args[0] if call.args else None
            if argument is None:
                argument = next((k.value for k in call.keywords if k.arg in _RAISE_KEYWORDS), None)
            if argument is not None and name and name[0].isupper():
                self._add(self.render(argument, node.lineno), "raise", name, "")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else _dotted(func)
        receiver = _dotted(func.value) if isinstance(func, ast.Attribute) else ""
        if node.args and method in _LOG_LEVELS:
            if receiver.endswith("warnings") and method == "warn":
                category = node.args[1] if len(node.args) > 1 else None
                category = category or next(
                    (k.value for k in node.keywords if k.arg == "category"), None
                )
                name = _dotted(category).rsplit(".", 1)[-1] if category is not None else ""
                self._add(self.render(node.args[0], node.lineno), "log", name, "warning")
            elif "log" in receiver.lower() or method == "print_warning_once":
                text = self.render(node.args[0], node.lineno)
                if text is not None and len(node.args) > 1:
                    text = printf_to_braces(text)
                self._add(text, "log", "", _LOG_LEVELS[method])
        elif method == "warn" and receiver == "" and node.args:  # from warnings import warn
            self._add(self.render(node.args[0], node.lineno), "log", "", "warning")
        self.generic_visit(node)


def python_messages(source: bytes, path: str) -> tuple[list[Found], bool]:
    """The messages of one Python file, and whether it parsed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to report
            tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError):
        return [], False
    visitor = _PythonMessages(path)
    try:
        visitor.visit(tree)
    except RecursionError:
        return [], False
    return visitor.found, True


# --- C, C++ and CUDA sources ---------------------------------------------------------------------

# name -> (kind, exception or level, index of the format argument or -1: every argument after the
# first is part of the message, as TORCH_CHECK joins them)
_C_CALLS: dict[str, tuple[str, str, int]] = {
    "GGML_LOG_ERROR": ("log", "error", 0),
    "GGML_LOG_WARN": ("log", "warning", 0),
    "LLAMA_LOG_ERROR": ("log", "error", 0),
    "LLAMA_LOG_WARN": ("log", "warning", 0),
    "LOG_ERR": ("log", "error", 0),
    "LOG_WRN": ("log", "warning", 0),
    "SRV_ERR": ("log", "error", 0),
    "SRV_WRN": ("log", "warning", 0),
    "SLT_ERR": ("log", "error", 1),
    "SLT_WRN": ("log", "warning", 1),
    "GGML_ABORT": ("raise", "abort", 0),
    "die": ("raise", "abort", 0),
    "die_fmt": ("raise", "abort", 0),
    "fprintf": ("log", "error", 1),  # only fprintf(stderr, ...)
    "PyErr_SetString": ("raise", "", 1),
    "PyErr_Format": ("raise", "", 1),
    "TORCH_CHECK": ("raise", "c10::Error", -1),
    "TORCH_CHECK_VALUE": ("raise", "ValueError", -1),
    "TORCH_CHECK_TYPE": ("raise", "TypeError", -1),
    "TORCH_CHECK_NOT_IMPLEMENTED": ("raise", "NotImplementedError", -1),
    "FLASHINFER_CHECK": ("raise", "c10::Error", -1),
    "TVM_FFI_ICHECK": ("raise", "tvm::Error", -1),
}
_C_TOKEN = re.compile(
    r'(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<string>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")'
    r"|(?P<char>'(?:\\.|[^'\\\n])+')|(?P<throw>\bthrow\s+(?:std::)?[A-Za-z_][\w:]*\s*\()"
    r"|(?P<call>\b[A-Za-z_]\w*\s*\()",
    re.S,
)
_C_ESCAPES = {"n": "\n", "t": " ", "r": "", '"': '"', "'": "'", "\\": "\\", "0": ""}


def _c_literal(token: str) -> str:
    body = token[token.index('"') + 1 : -1]
    return re.sub(r"\\(.)", lambda m: _C_ESCAPES.get(m.group(1), ""), body)


def _c_arguments(text: str, start: int, quotes: str = "\"'") -> tuple[list[str], int]:
    """The top-level arguments of the call whose `(` is just before `start`, as source text
    (`quotes`: the characters that open a literal; Go adds the backtick, Rust has no `'`)."""
    depth, index, begin = 1, start, start
    arguments: list[str] = []
    limit = min(len(text), start + 8000)
    while index < limit:
        char = text[index]
        if char in quotes:
            end = index + 1
            while end < limit and text[end] != char:
                end += 2 if text[end] == "\\" and char != "`" else 1
            index = end + 1
            continue
        if text.startswith("//", index):
            newline = text.find("\n", index)
            index = limit if newline < 0 else newline
            continue
        if text.startswith("/*", index):
            close = text.find("*/", index + 2)
            index = limit if close < 0 else close + 2
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                arguments.append(text[begin:index])
                return arguments, index + 1
        elif char == "," and depth == 1:
            arguments.append(text[begin:index])
            begin = index + 1
        index += 1
    return [], start


_LITERAL = re.compile(r'(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*"')


def _c_text(argument: str) -> str | None:
    """An argument's text: adjacent literals joined (a macro between them as `{}`); the first
    argument's text for a call such as format(...) or std::string(...); None without a literal."""
    literals = list(_LITERAL.finditer(argument))
    if not literals:
        return None
    parts: list[str] = []
    position = literals[0].start()
    head = argument[:position].strip()
    call = re.fullmatch(r"(?:[\w:]+::)?(\w+)\s*\(", head)
    if head and call is None and not head.startswith("("):
        parts.append("{}")
    for literal in literals:
        between = argument[position : literal.start()].strip()
        if between and between not in {"(", ")"} and position != literals[0].start():
            parts.append("{}")
        parts.append(_c_literal(literal.group()))
        position = literal.end()
    if call is not None:  # format("...", a, b): the format alone
        first = _c_arguments(argument, argument.index("(") + 1)[0]
        if first:
            inner = _c_text(first[0])
            return inner
    return "".join(parts)


def c_messages(
    source: str, path: str, extra: tuple[tuple[str, str, str, int], ...] = ()
) -> list[Found]:
    """The messages of one C, C++ or CUDA file (see the module docstring); `extra`: a
    producer's own calls (name, kind, exception or level, index of the format argument)."""
    calls = _C_CALLS | {name: (kind, label, index) for name, kind, label, index in extra}
    found: list[Found] = []
    for match in _C_TOKEN.finditer(source):
        if match.lastgroup in {"comment", "string", "char"}:
            continue
        token = match.group()
        if match.lastgroup == "throw":
            name = token[len("throw") :].strip()[:-1].strip()
            arguments, _ = _c_arguments(source, match.end())
            text = _c_text(",".join(arguments)) if arguments else None
            if text is not None:
                text = printf_to_braces(text)
                found.append(Found(text, "raise", name, "", path))
            continue
        name = token[:-1].strip()
        rule = calls.get(name)
        if rule is None:
            continue
        kind, label, index = rule
        arguments, _ = _c_arguments(source, match.end())
        if not arguments:
            continue
        if name == "fprintf" and arguments[0].strip() != "stderr":
            continue
        if index < 0:
            pieces = [_c_text(argument) for argument in arguments[1:]]
            if not any(piece is not None for piece in pieces):
                continue
            text = "".join(piece if piece is not None else "{}" for piece in pieces)
        else:
            if len(arguments) <= index:
                continue
            text = _c_text(arguments[index])
            if text is None:
                continue
            text = printf_to_braces(text)
        exception = label if kind == "raise" else ""
        if name.startswith("PyErr_"):
            exception = arguments[0].strip().removeprefix("PyExc_")
        level = label if kind == "log" else ""
        found.append(Found(text, kind, exception, level, path))
    return found


# --- Go sources ----------------------------------------------------------------------------------

# Go's fmt verbs (%v, %+v, %w, %q, %T...) as `{}`.
_GO_PRINTF = re.compile(
    r"%[-+# 0]*(?:[0-9]+|\*)?(?:\.(?:[0-9]+|\*))?(?:\[[0-9]+\])?[vTtbcdoOqxXUeEfFgGspw]"
)
# name -> index of the message argument, for the calls that make an error value
_GO_ERRORS: dict[str, int] = {
    "errors.New": 0,
    "fmt.Errorf": 0,
    "errors.Errorf": 0,
    "xerrors.Errorf": 0,
    "errors.Wrap": 1,
    "errors.Wrapf": 1,
    "status.Error": 1,
    "status.Errorf": 1,
    "panic": 0,
}
# logger method -> (level, index of the message argument); a receiver whose name contains "log"
# (log, slog, klog, logrus, logger, s.log)
_GO_LOG: dict[str, tuple[str, int]] = {
    "Fatal": ("critical", 0),
    "Fatalf": ("critical", 0),
    "Fatalln": ("critical", 0),
    "Panic": ("critical", 0),
    "Panicf": ("critical", 0),
    "Error": ("error", 0),
    "Errorf": ("error", 0),
    "Errorln": ("error", 0),
    "ErrorS": ("error", 1),
    "ErrorContext": ("error", 1),
    "Warn": ("warning", 0),
    "Warnf": ("warning", 0),
    "Warnln": ("warning", 0),
    "Warning": ("warning", 0),
    "Warningf": ("warning", 0),
    "WarnContext": ("warning", 1),
}
_GO_TOKEN = re.compile(
    r'(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<string>"(?:\\.|[^"\\\n])*"|`[^`]*`)'
    r"|(?P<char>'(?:\\.|[^'\\\n])+')|(?P<reply>\bgin\.H\{)|(?P<call>\b[A-Za-z_][\w.]*\s*\()",
    re.S,
)
# a name given one string literal in a file (const X = "...", X := "..."), to resolve it
_GO_NAMED = re.compile(
    r'\b([A-Za-z_]\w*)(?:\s+string)?\s*:?=\s*("(?:\\.|[^"\\\n])*"|`[^`]*`)\s*(?=[\n;)])'
)
_GO_LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"|`[^`]*`')


def go_printf_to_braces(text: str) -> str:
    """Go's fmt verbs as `{}` (%q, which prints a quoted string, as `"{}"`), `%%` as `%`."""

    def one(match: re.Match[str]) -> str:
        return '"{}"' if match.group().endswith("q") else "{}"

    return "%".join(_GO_PRINTF.sub(one, part) for part in text.split("%%"))


def _go_literal(token: str) -> str:
    if token.startswith("`"):
        return token[1:-1]
    return re.sub(r"\\(.)", lambda m: _C_ESCAPES.get(m.group(1), ""), token[1:-1])


def _top_level_split(text: str, separator: str, quotes: str) -> list[str]:
    """text split at each `separator` outside literals and brackets."""
    parts, depth, begin, index = [], 0, 0, 0
    while index < len(text):
        char = text[index]
        if char in quotes:
            end = index + 1
            while end < len(text) and text[end] != char:
                end += 2 if text[end] == "\\" and char != "`" else 1
            index = end + 1
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[begin:index])
            begin = index + 1
        index += 1
    parts.append(text[begin:])
    return parts


def _go_names(source: str) -> dict[str, str]:
    """The names a Go file gives one string literal, each given only one (a const, a var, a
    `:=`), with their text."""
    named: dict[str, set[str]] = {}
    for match in _GO_NAMED.finditer(source):
        named.setdefault(match.group(1), set()).add(_go_literal(match.group(2)))
    return {name: next(iter(texts)) for name, texts in named.items() if len(texts) == 1}


def _go_text(argument: str, names: dict[str, str] | None = None) -> str | None:
    """A Go string expression's text: literals (or names given one, see _go_names) joined by
    `+` (any other operand as `{}`), and fmt.Sprintf's format (verbs as `{}`); None without a
    literal."""
    parts: list[str] = []
    literal = False
    for operand in _top_level_split(argument, "+", "\"'`"):
        operand = operand.strip()
        if _GO_LITERAL.fullmatch(operand):
            parts.append(_go_literal(operand))
            literal = True
            continue
        if names and operand in names:
            parts.append(names[operand])
            literal = True
            continue
        call = re.match(r"fmt\.Sprintf\s*\(", operand)
        if call is not None:
            arguments, _ = _c_arguments(operand, call.end(), "\"'`")
            inner = _go_text(arguments[0], names) if arguments else None
            if inner is not None:
                parts.append(go_printf_to_braces(inner))
                literal = True
                continue
        parts.append("{}")
    return "".join(parts) if literal else None


def go_messages(source: str, path: str) -> list[Found]:
    """The messages of one Go file: the errors it makes (errors.New, fmt.Errorf, errors.Wrap,
    status.Errorf, panic: raise, "error" or "panic") and its logger calls at Fatal, Panic, Error
    and Warn levels (log, slog, klog, logrus, logr: a receiver whose name contains "log"), and
    the "error" of a gin.H{...} reply (raise, "error"). A name the file gives one literal is
    read as that literal."""
    found: list[Found] = []
    names = _go_names(source)
    for match in _GO_TOKEN.finditer(source):
        if match.lastgroup == "reply":
            entries, _ = _c_arguments(source, match.end(), "\"'`")
            for entry in entries:
                key, sep, value = entry.partition(":")
                if sep and key.strip() == '"error"':
                    text = _go_text(value, names)
                    if text is not None:
                        found.append(Found(text, "raise", "error", "", path))
            continue
        if match.lastgroup != "call":
            continue
        name = match.group()[:-1].strip()
        receiver, _, method = name.rpartition(".")
        if name in _GO_ERRORS:
            index = _GO_ERRORS[name]
            arguments, _ = _c_arguments(source, match.end(), "\"'`")
            if len(arguments) <= index:
                continue
            text = _go_text(arguments[index], names)
            if text is None:
                continue
            if name.endswith("f"):
                text = go_printf_to_braces(text)
            exception = "panic" if name == "panic" else "error"
            found.append(Found(text, "raise", exception, "", path))
        elif method in _GO_LOG and "log" in receiver.lower():
            level, index = _GO_LOG[method]
            arguments, _ = _c_arguments(source, match.end(), "\"'`")
            # logr's Error(err, "message", ...) puts the error first
            candidates = arguments[index : index + 1] if index else arguments[:2]
            texts = (_go_text(candidate, names) for candidate in candidates)
            text = next((t for t in texts if t is not None), None)
            if text is None:
                continue
            if method.endswith("f"):
                text = go_printf_to_braces(text)
            found.append(Found(text, "log", "", level, path))
    return found


# --- Rust sources --------------------------------------------------------------------------------

# macro -> (kind, exception or level, index of the format argument; -1: the first argument that
# is a literal, as tracing's macros put their fields first)
_RUST_MACROS: dict[str, tuple[str, str, int]] = {
    "anyhow": ("raise", "anyhow::Error", 0),
    "bail": ("raise", "anyhow::Error", 0),
    "ensure": ("raise", "anyhow::Error", 1),
    "panic": ("raise", "panic", 0),
    "error": ("log", "error", -1),
    "warn": ("log", "warning", -1),
}
_RUST_STRING = r'b?r(?P<hashes>#*)".*?"(?P=hashes)|b?"(?:\\.|[^"\\])*"'
_RUST_TOKEN = re.compile(
    r"(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<string>" + _RUST_STRING + r")"
    r"|(?P<attr>#\[error\s*\()|(?P<expect>\.(?:expect|context)\s*\()"
    r"|(?P<macro>\b[A-Za-z_][\w:]*!\s*\()",
    re.S,
)
_RUST_LITERAL = re.compile(_RUST_STRING, re.S)
# what `#[error(...)]` describes: the variant (or struct) after the attribute's `]`
_RUST_VARIANT = re.compile(
    r"\s*\](?:\s|#\[[^\]]*\]|//[^\n]*)*(?:(?:pub(?:\([^)]*\))?|struct|enum)\s+)*"
    r"([A-Za-z_]\w*)"
)
_RUST_ESCAPES = {"n": "\n", "t": " ", "r": "", '"': '"', "'": "'", "\\": "\\", "0": ""}


def _rust_literal(token: str) -> str:
    token = token.removeprefix("b")
    if token.startswith("r"):
        hashes = len(token) - len(token.lstrip("r#")) - 1
        return token[hashes + 2 : len(token) - hashes - 1]
    body = re.sub(r"\\\n\s*", "", token[1:-1])  # a line continuation
    body = re.sub(r"\\u\{[0-9a-fA-F]+\}", "", body)
    return re.sub(r"\\(.)", lambda m: _RUST_ESCAPES.get(m.group(1), ""), body)


def _rust_text(argument: str) -> str | None:
    """The format string of a macro argument that is one literal (format fields as `{}`)."""
    argument = argument.strip()
    if not _RUST_LITERAL.fullmatch(argument):
        return None
    return format_to_braces(_rust_literal(argument))


def rust_messages(source: str, path: str) -> list[Found]:
    """The messages of one Rust file: thiserror's `#[error("...")]` (raise, the variant it
    describes), anyhow!, bail!, ensure! and .context("...") (raise, anyhow::Error), panic! and
    .expect("...") (raise, panic), and the error!/warn! macros of tracing and log (their first
    literal)."""
    found: list[Found] = []
    for match in _RUST_TOKEN.finditer(source):
        group = match.lastgroup
        if group in {"comment", "string"}:
            continue
        arguments, end = _c_arguments(source, match.end(), '"')
        if not arguments:
            continue
        if group == "attr":
            text = _rust_text(arguments[0])
            variant = _RUST_VARIANT.match(source, end)
            if text is not None and variant is not None:
                found.append(Found(text, "raise", variant.group(1), "", path))
            continue
        if group == "expect":
            text = _rust_text(arguments[0])
            if text is not None:
                context = match.group().startswith(".context")
                found.append(
                    Found(text, "raise", "anyhow::Error" if context else "panic", "", path)
                )
            continue
        name = match.group()[:-1].strip()[:-1].rsplit("::", 1)[-1]
        rule = _RUST_MACROS.get(name)
        if rule is None:
            continue
        kind, label, index = rule
        if index < 0:
            text = next((t for t in map(_rust_text, arguments) if t is not None), None)
        else:
            text = _rust_text(arguments[index]) if len(arguments) > index else None
        if text is None:
            continue
        exception = label if kind == "raise" else ""
        level = label if kind == "log" else ""
        found.append(Found(text, kind, exception, level, path))
    return found


# --- native libraries ----------------------------------------------------------------------------

NATIVE_WORDS = (
    r"error|fail|invalid|unsupported|not supported|out of memory|not found|mismatch|"
    r"insufficient|cannot|can't|could not|unable to|too old|incompatible|no kernel image|"
    r"timed out|timeout|unavailable|not available|not initiali[sz]ed|denied|no such|abort|"
    r"not detected|stub library|not permitted|not ready|busy|^no |found no "
)
_NATIVE_KEY = re.compile(NATIVE_WORDS, re.I)
_ERROR_NAME = re.compile(
    r"^(?:cuda(?:Error|Success)[A-Za-z0-9]*|CUDA_ERROR_[A-Z0-9_]+|nccl[A-Za-z]*Error[A-Za-z]*)$"
)
_RUN = re.compile(rb"[\x20-\x7e\t]{%d,}" % MIN_CHARS)


def native_filter(text: str) -> bool:
    """Whether a printable string of a native library looks like an error message (see the
    module docstring)."""
    if _ERROR_NAME.match(text):
        return True
    if not NATIVE_MIN <= len(text) <= NATIVE_MAX or not _NATIVE_KEY.search(text):
        return False
    words = re.findall(r"[A-Za-z]{2,}", text)
    if len(words) < 3 or text.count(" ") < 2:
        return False
    letters = sum(ch.isalpha() or ch == " " for ch in text)
    if letters < 0.7 * len(text):
        return False
    paths = re.sub(r"https?://\S+", "", text).count("/")  # a URL in a message is no path
    if text.startswith(("_Z", "N5", "St")) or paths >= 3 or "::~" in text:
        return False
    return not re.search(r"[<>{}].*[<>{}].*[<>{}]", text.replace("{}", ""))


def native_messages(stream: Any, path: str, limit: int = MAX_NATIVE_BYTES) -> list[Found]:
    """The error-like printable strings of a native library, read in blocks. A sentence right
    after an error code's name (cudaErrorNoDevice, then "no CUDA-capable device is detected":
    the table cudaGetErrorString reads) is kept whatever its words."""
    seen: set[str] = set()
    named: set[str] = set()
    previous = ""
    carry = b""
    read = 0
    while read < limit:
        block = stream.read(min(_BLOCK, limit - read))
        if not block:
            break
        read += len(block)
        data = carry + block
        # a run that reaches the block's end may go on in the next block
        tail = len(data)
        while tail > 0 and 0x20 <= data[tail - 1] <= 0x7E:
            tail -= 1
        carry = data[tail:][-NATIVE_MAX * 4 :]
        for match in _RUN.finditer(data, 0, tail):
            text = match.group().decode("ascii").strip()
            seen.add(text)
            if _ERROR_NAME.match(previous) and text.count(" ") >= 2 and len(text) <= NATIVE_MAX:
                named.add(text)
            previous = text
    if carry:
        seen.add(carry.decode("ascii", "replace").strip())
    found = []
    for text in sorted(seen):
        if text in named or native_filter(text):
            found.append(Found(printf_to_braces(text), "native", "", "", path))
    return found


# --- a release -----------------------------------------------------------------------------------


@dataclass
class Extraction:
    producer: str
    version: str
    found: list[Found] = field(default_factory=list)
    files: int = 0
    unparsed: int = 0
    skipped_large: int = 0


def _matches(patterns: tuple[str, ...], path: str) -> bool:
    return any(re.search(pattern, path) for pattern in patterns)


def extract_archive(producer: Producer, version: str, archive: Path) -> Extraction:
    """The raw messages of one release (every occurrence, uncleaned)."""
    result = Extraction(producer.name, version)
    for member in members(archive):
        if result.files >= MAX_FILES or len(result.found) >= MAX_PER_RELEASE:
            break
        path = member.path
        if producer.native and _matches(producer.native, path):
            with contextlib.closing(member.open()) as stream:
                result.found += native_messages(stream, path)
            result.files += 1
            continue
        if producer.c_sources and _matches(producer.c_sources, path):
            if re.search(r"\.(c|cc|cpp|cu|cuh|h|hpp)$", path):
                if member.size > MAX_SOURCE_BYTES:
                    result.skipped_large += 1
                    continue
                with contextlib.closing(member.open()) as stream:
                    text = stream.read().decode("utf-8", "replace")
                result.found += c_messages(text, path)
                result.files += 1
            continue
        if not producer.python or not path.endswith(".py"):
            continue
        if _SKIP_ALWAYS.search(path) or _matches(producer.skip, path):
            continue
        if member.size > MAX_SOURCE_BYTES:
            result.skipped_large += 1
            continue
        with contextlib.closing(member.open()) as stream:
            found, parsed = python_messages(stream.read(), path)
        result.found += found
        result.files += 1
        result.unparsed += not parsed
    return result


def extract_folder(producer: Producer, version: str, root: Path) -> Extraction:
    """As extract_archive, over an unpacked tree (the tests build one)."""
    result = Extraction(producer.name, version)
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        path = file.relative_to(root).as_posix()
        if producer.native and _matches(producer.native, path):
            with file.open("rb") as stream:
                result.found += native_messages(stream, path)
        elif producer.c_sources and _matches(producer.c_sources, path):
            result.found += c_messages(file.read_text("utf-8", "replace"), path)
        elif producer.python and path.endswith(".py") and not _SKIP_ALWAYS.search(path):
            found, parsed = python_messages(file.read_bytes(), path)
            result.found += found
            result.unparsed += not parsed
        else:
            continue
        result.files += 1
    return result


# --- repositories --------------------------------------------------------------------------------

# What a repository holds beside the code a user runs: test data, mocks, end-to-end and
# integration tests (tests, docs and examples are left out by _SKIP_ALWAYS).
_SKIP_REPOSITORY = re.compile(
    r"(^|/)(testdata|e2e|mocks?|integration[-_]tests?|fixtures)/|_test\.go$|_mock\.go$"
)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_C_SUFFIX = re.compile(r"\.(c|cc|cpp|cu|cuh|h|hpp)$")


def _git_dir(folder: Path) -> Path:
    """The git directory of a clone (its .git) or of a bare repository (itself)."""
    return folder / ".git" if (folder / ".git").exists() else folder


def _git(git_dir: Path, *arguments: str) -> bytes:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", *arguments], capture_output=True, check=False
    )
    if done.returncode != 0:
        tail = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(f"git {arguments[0]}: {tail}")
    return done.stdout


def repository_files(git_dir: Path, commit: str) -> list[tuple[str, int, str]]:
    """(path, size, blob) of each regular file of the commit's tree, by path (no link, no
    submodule)."""
    files = []
    for record in _git(git_dir, "ls-tree", "-r", "-l", "-z", commit).split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, blob, size = meta.split()
        # a blob the snapshot lacks (its largest files may be absent) has no size
        if kind == b"blob" and mode in {b"100644", b"100755"} and size.isdigit():
            files.append((path.decode("utf-8", "replace"), int(size), blob.decode()))
    return sorted(files)


class _Blobs:
    """Blobs read through one `git cat-file --batch` (what `git show <blob>` prints)."""

    def __init__(self, git_dir: Path) -> None:
        self.process = subprocess.Popen(
            ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def read(self, blob: str) -> bytes:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(blob.encode() + b"\n")
        self.process.stdin.flush()
        header = self.process.stdout.readline().split()
        if len(header) != 3:
            raise RuntimeError(f"git cat-file: no blob {blob}")
        data = self.process.stdout.read(int(header[2]))
        self.process.stdout.read(1)
        return data

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def repository_reader(producer: Producer, path: str) -> str | None:
    """How a repository's file is read (go, rust, c, python), or None when it is not."""
    if _SKIP_ALWAYS.search(path) or _SKIP_REPOSITORY.search(path) or _matches(producer.skip, path):
        return None
    if path.endswith(".go") and _matches(producer.go_sources, path):
        return "go"
    if path.endswith(".rs") and _matches(producer.rust_sources, path):
        return "rust"
    if _C_SUFFIX.search(path) and _matches(producer.c_sources, path):
        return "c"
    if producer.python and path.endswith(".py"):
        return "python"
    return None


def extract_repository(producer: Producer, commit: str, git_dir: Path) -> Extraction:
    """The raw messages of one commit of a repository (read from its git directory, no network;
    RuntimeError when the directory lacks the commit)."""
    result = Extraction(producer.name, commit)
    _git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}")
    blobs = _Blobs(git_dir)
    try:
        for path, size, blob in repository_files(git_dir, commit):
            if result.files >= MAX_FILES or len(result.found) >= MAX_PER_RELEASE:
                break
            reader = repository_reader(producer, path)
            if reader is None:
                continue
            if size > MAX_SOURCE_BYTES:
                result.skipped_large += 1
                continue
            data = blobs.read(blob)
            if reader == "python":
                found, parsed = python_messages(data, path)
                result.found += found
                result.unparsed += not parsed
            else:
                text = data.decode("utf-8", "replace")
                if reader == "go":
                    result.found += go_messages(text, path)
                elif reader == "rust":
                    result.found += rust_messages(text, path)
                else:
                    result.found += c_messages(text, path, producer.c_calls)
            result.files += 1
    finally:
        blobs.close()
    return result


def extract(
    cache: Path, producers: Iterable[Producer], repo_dirs: dict[str, Path] | None = None
) -> dict[str, list[Extraction]]:
    """Each downloaded release's messages (cached beside the archive, by EXTRACTOR_VERSION), and
    each repository producer's commits, read from its git directory in repo_dirs (by producer
    name or owner/name)."""
    out: dict[str, list[Extraction]] = {}
    for producer in producers:
        _extract_own(cache, producer, repo_dirs, out)
        if producer.cited:
            out.setdefault(producer.name, []).extend(cited_extractions(producer))
    return out


def _extract_own(
    cache: Path,
    producer: Producer,
    repo_dirs: dict[str, Path] | None,
    out: dict[str, list[Extraction]],
) -> None:
    """The releases or commits the producer's own reader reads, into out."""
    if producer.repository:
        found = (repo_dirs or {}).get(producer.name) or (repo_dirs or {}).get(producer.repository)
        if found is None:
            print(
                f"missing {producer.name}: no --repo-dir {producer.name}=GITDIR",
                file=sys.stderr,
            )
            return
        for version in own_versions(producer):
            print(f"extract {producer.name} {version}", file=sys.stderr, flush=True)
            try:
                result = extract_repository(producer, version, _git_dir(found))
            except RuntimeError as error:
                print(f"missing {producer.name} {version}: {error}", file=sys.stderr)
                continue
            result.found = sorted(set(result.found))
            out.setdefault(producer.name, []).append(result)
        return
    for version in own_versions(producer):
        folder = cache / producer.name / version
        archive = _archive(folder) if folder.is_dir() else None
        if archive is None:
            print(f"missing {producer.name} {version}: not downloaded", file=sys.stderr)
            continue
        saved = folder / f"extract-v{EXTRACTOR_VERSION}.json"
        if saved.is_file():
            document = json.loads(saved.read_text(encoding="utf-8"))
            result = Extraction(
                producer.name,
                version,
                [Found(**item) for item in document["found"]],
                document["files"],
                document["unparsed"],
                document["skipped_large"],
            )
        else:
            print(f"extract {producer.name} {version}", file=sys.stderr, flush=True)
            result = extract_archive(producer, version, archive)
            result.found = sorted(set(result.found))
            document = {
                "archive": archive.name,
                "files": result.files,
                "unparsed": result.unparsed,
                "skipped_large": result.skipped_large,
                "found": [vars(item) for item in result.found],
            }
            saved.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
        out.setdefault(producer.name, []).append(result)


# --- families ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A family rule: a message matching `words` (or raised as one of `classes`) is in `family`,
    and caused by `cause` ("" where the message alone does not decide the cause)."""

    family: str
    cause: str
    words: str = ""
    classes: tuple[str, ...] = ()
    case: bool = False  # match `words` case-sensitively

    def matches(self, text: str, exception: str) -> bool:
        if exception and exception in self.classes:
            return True
        return (
            bool(self.words) and re.search(self.words, text, 0 if self.case else re.I) is not None
        )


# Advice, not a failure: a deprecation, a hint, a fallback the server survives.
NOT_A_CAUSE = re.compile(
    r"deprecat|will be removed|no longer (be )?supported in a future|is experimental|"
    r"for better performance|may (be slow|cause|lead to|result in)|consider (using|setting)|"
    r"falling back|fall back|defaulting to|using the default|is ignored|will be ignored|"
    r"not recommended|to silence this warning|performance (may|will) be",
    re.I,
)
NOT_A_CAUSE_CLASSES = ("DeprecationWarning", "FutureWarning", "PendingDeprecationWarning")

# First match wins. The families: cuda_init (CUDA and driver initialisation), platform (devices
# and platform detection), gpu_memory, host_memory, distributed (NCCL and other collectives,
# process groups, Ray), model_loading (model files, weights and Hub access), config (arguments
# and configuration validation), chat_template, tool_parsing, dependency (imports, versions, ABI).
RULES: tuple[Rule, ...] = (
    Rule("chat_template", "chat_template", r"chat[ _-]?template|jinja|apply_chat_template"),
    Rule(
        "tool_parsing",
        "tool_call_parser",
        r"tool[ _-]?(call|parser|choice)|tool_calls|function[ _-]call|auto[ _-]tool|"
        r"reasoning[ _-]parser|--tool",
    ),
    Rule(
        "cuda_init",
        "driver_too_old",
        r"driver (on your system )?is too old|driver version is insufficient|insufficient ?driver|"
        r"newer (version of the )?(cuda )?driver|update your (gpu |nvidia |cuda )?driver|"
        r"driver is older than|requires? (a )?(cuda )?driver",
    ),
    Rule(
        "cuda_init",
        "driver_library_mismatch",
        r"driver/library version mismatch|library version mismatch|kernel module.*version|"
        r"kernel version [^\n]*does not match [^\n]*version",
    ),
    Rule(
        "cuda_init",
        "fabric_manager_missing",
        r"system not yet initiali[sz]ed|fabric ?manager|cudaErrorSystemNotReady|"
        r"CUDA_ERROR_SYSTEM_NOT_READY",
    ),
    Rule(
        "cuda_init",
        "compat_lib_error",
        r"forward compat|cuda-compat|compat(ibility)? (package|library)|"
        r"system has unsupported display driver|cudaErrorSystemDriverMismatch|"
        r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|cudaErrorCompatNotSupportedOnDevice|"
        r"CUDA_ERROR_COMPAT_NOT_SUPPORTED",
    ),
    Rule(
        "cuda_init",
        "unsupported_gpu_arch",
        r"no kernel image|no binary for gpu|NoKernelImageForDevice|NO_BINARY_FOR_GPU|"
        r"compute capabilit|\bsm_?[0-9]{2,3}a?\b|\bsm[0-9]{2}\b|unsupported (gpu )?architecture|"
        r"not compatible with the current (pytorch|gpu)|invalid device function|"
        r"unsupported (ptx|toolchain)|ptx (was )?compiled with an unsupported|"
        r"UnsupportedPtxVersion|UNSUPPORTED_PTX_VERSION|(gpu|device) (is )?not supported|"
        r"requires? (an? )?(ampere|hopper|blackwell|volta|turing|ada)|"
        r"no device code compatible with",
    ),
    Rule(
        "platform",
        "no_gpu_visible",
        r"no cuda gpus are available|no cuda-capable device|cudaErrorNoDevice|"
        r"CUDA_ERROR_NO_DEVICE|failed to infer device type|found no nvidia driver|"
        r"nvidia driver.*not (found|installed|loaded)|no (nvidia )?gpus? (was |were )?"
        r"(found|detected|available)|no (cuda |gpu )?devices? (found|detected|available)|"
        r"cuda is not available|torch\.cuda\.is_available\(\)|cudaErrorInitializationError|"
        r"cuda unknown error|available devices to be zero|"
        r"CUDA_ERROR_NOT_INITIALIZED|nvidia-smi|devices?(\(s\))? (is/are |are |is )?busy or "
        r"unavailable|invalid device ordinal|cudaErrorInvalidDevice|CUDA_ERROR_INVALID_DEVICE",
    ),
    Rule(
        "gpu_memory",
        "kv_cache_insufficient",
        r"(kv[ _-]?cache|cache blocks|gpu blocks)[^\n]*(memory|insufficient|not enough|too "
        r"(small|large)|larger than|exceed|no available|increase|reduce)|"
        r"no available memory for the cache|num_gpu_blocks|"
        r"larger than the maximum number of tokens that can be stored",
    ),
    Rule("gpu_memory", "", r"kv[ _-]?cache|cache blocks"),
    Rule("host_memory", "shm_insufficient", r"/dev/shm|shared memory|\bshm\b|shm_open"),
    Rule(
        "host_memory",
        "host_memory",
        r"cannot allocate memory|bad_alloc|oom[ -]?kill|memory limit of the container|"
        r"(host|cpu|system) (memory|ram)[^\n]*(not enough|insufficient|exceed|out of|too "
        r"(small|little)|only)|(not enough|insufficient|out of) (host|cpu|system) (memory|ram)|"
        r"memory cgroup|\bkill(ed)? process\b|cpu ?allocator",
        classes=("MemoryError",),
    ),
    Rule("host_memory", "", r"host memory|pinned memory|cpu memory|\bram\b|swap space|cpu offload"),
    Rule(
        "gpu_memory",
        "",
        r"out of memory|\boom\b|outofmemory|MemoryAllocation|cudaErrorMemory|"
        r"CUDA_ERROR_OUT_OF_MEMORY|gpu[_ -]memory[_ -]utili[sz]ation|not enough (gpu |device )?"
        r"memory|insufficient (gpu |device )?memory|free (gpu )?memory|memory profiling|"
        r"(gpu|device|cuda) memory|failed to allocate|allocation failed|cudaMalloc",
        classes=("OutOfMemoryError",),
    ),
    Rule(
        "cuda_init",
        "",
        r"\bcuda (error|initiali[sz]ation|driver|runtime|failure|call failed)|cuda_error_|"
        r"cudaError|cudaGetDevice|cudaSetDevice|cuInit|\bcudart\b|libcuda|\bnvml\b|nvml[A-Z_]|"
        r"cuda failure|cublas|cudnn|cufft|curand|cusparse|cusolver|nvrtc|CUresult|cuda kernel|"
        r"illegal memory access|device-side assert|misaligned address|launch failure|"
        r"unspecified launch|uncorrectable ecc|CUDA_LAUNCH_BLOCKING",
        classes=("CudaError", "CUDAError", "AcceleratorError"),
    ),
    Rule(
        "dependency",
        "dependency_mismatch",
        r"no module named|not installed|pip install|please install|is required (but|to|for)|"
        r"requires? [\w.-]+ ?(>=|==|<=|>|<|version)|version [\w.]+ or (later|higher|newer)|"
        r"incompatible (version|with)|undefined symbol|cannot open shared object|"
        r"\.so(\.[0-9]+)*: |\bABI\b|compiled (with|against|for) (a )?(different|torch|cuda)|"
        r"built (with|for|against) (a )?(different|torch|cuda)|failed to (import|load) "
        r"(the )?(library|extension|module|kernel)|could not (import|load) |"
        r"import (error|failed)|cannot import|version mismatch|upgrade (to|your)|"
        r"is not available\. please|unsupported (torch|cuda|python|triton) version|"
        r"module '[^'\n]*' has no attribute|\bfailed to import \S+ because\b|"
        r"takes \S+ positional arguments? but \S+ (were|was) given|"
        r"missing \S+ required positional arguments?",
        classes=("ImportError", "ModuleNotFoundError"),
    ),
    Rule(
        "model_loading",
        "cache_dir_not_writable",
        r"(cache|HF_HOME|HF_HUB_CACHE|TRANSFORMERS_CACHE|download)[^\n]*"
        r"(not writable|permission denied|read-only)|"
        r"(not writable|permission denied|read-only)[^\n]*(cache|HF_HOME)",
    ),
    # transformers' AutoConfig says this only when the config it read has no model_type at all (a
    # type it does not know is "does not recognize this architecture"): the folder is not a
    # whole transformers checkpoint (a LoRA adapter, a GGUF export, the wrong folder)
    Rule("model_loading", "model_path_or_access", r"should have a `model_type` key"),
    Rule(
        "model_loading",
        "model_arch_unsupported",
        r"(architecture|model[ _]type)s? [^\n]*(not supported|not (yet )?implemented|"
        r"unrecognized|unknown|not recognized|not currently supported)|"
        r"unrecognized (model|configuration|config class)|supported architectures|"
        r"does not recognize this architecture|trust_remote_code|trust-remote-code|"
        r"model class [^\n]*not (found|supported)|"
        r"no model architectures? (are |is )?specified|"
        # vLLM's fallback to the Transformers backend, refused for the architecture
        r"has no vLLM implementation|Transformers implementation[^\n]* is not compatible",
    ),
    Rule(
        "model_loading",
        "model_path_or_access",
        r"does not appear to have a file|not a valid model identifier|repository not found|"
        r"RepositoryNotFound|gated (repo|model)|\b401\b|\b403\b|unauthori[sz]ed|"
        r"access to (model|repo)|huggingface\.co|\bhf_?token\b|HF_HUB_OFFLINE|offline mode|"
        r"local_files_only|(revision|repo(sitory)?|model|file|folder|directory|path)[^\n]*"
        r"(not found|does not exist|no such)|(not found|does not exist|no such)[^\n]*"
        r"(revision|repo(sitory)?|model|file|folder|directory|path)|EntryNotFound|"
        r"LocalEntryNotFound|HfHubHTTPError|cannot find the requested files|"
        r"connection (error|to) [^\n]*(hub|huggingface)|couldn't connect to|"
        r"permission denied|login|authenticat|path to a local folder",
        classes=(
            "RepositoryNotFoundError",
            "GatedRepoError",
            "RevisionNotFoundError",
            "EntryNotFoundError",
            "LocalEntryNotFoundError",
            "HfHubHTTPError",
            "FileNotFoundError",
            "PermissionError",
            "OfflineModeIsEnabled",
        ),
    ),
    Rule(
        "model_loading",
        "",
        r"safetensors|checkpoint|\bweights?\b|state[ _]dict|config\.json|tokenizer[^\n]*"
        r"(not found|could not|failed|missing)|header too large|incomplete metadata|"
        r"MetadataIncompleteBuffer|invalid header|(shape|size) mismatch|missing key|"
        r"unexpected key|gguf|quantiz(ation|ed) (config|method)|load(ing)? (the )?model|"
        r"deserializ\w* (the )?header",
        classes=("SafetensorError",),
    ),
    Rule(
        "distributed",
        "nccl_or_network",
        r"\bnccl|\bgloo\b|process ?group|rendezvous|tcpstore|\bc10d\b|all_?reduce|all_?gather|"
        r"reduce_scatter|broadcast|collective|\brdma\b|infiniband|\bibv|\bnvlink|\bsocket|"
        r"connection (refused|reset|closed|timed out)|address already in use|MASTER_ADDR|"
        r"MASTER_PORT|timed out waiting|watchdog|heartbeat|\bnet/ib|\bIB\b|network|"
        r"custom allreduce|p2p|peer access|cuda ipc|ncclSystemError|ncclInternalError|"
        r"ncclUnhandledCudaError|ncclInvalidUsage|ncclRemoteError",
        classes=("DistBackendError", "DistNetworkError", "DistStoreError"),
    ),
    Rule(
        "distributed",
        "",
        r"placement group|\bray\b|world[ _]size|\brank\b|tensor[ _-]parallel|"
        r"pipeline[ _-]parallel|data[ _-]parallel|expert[ _-]parallel|distributed|"
        r"multi-?node|worker (died|failed|exited)|actor (died|failed)|RayActorError",
        classes=("RayActorError", "RaySystemError", "ActorDiedError", "GetTimeoutError"),
    ),
    Rule(
        "platform",
        "",
        r"\bdevice type|\bplatform\b|\bROCm\b|\bHIP\b|\bXPU\b|\bTPU\b|\bHPU\b|\bNPU\b|"
        r"\bMPS\b|cpu backend|current device|no (accelerator|device)|device [^\n]*not available|"
        r"\bactive drivers?\b",
    ),
    Rule(
        "config",
        "bad_cli_argument",
        r"(argument|--[a-z][a-z0-9-]+|config(uration)?|option|flag|parameter|setting|"
        r"environment variable|env var|VLLM_[A-Z_]+|max[_-]model[_-]len|dtype|quantization|"
        r"block[_-]size|max[_-]num[_-](seqs|batched[_-]tokens)|served[_-]model[_-]name|"
        r"rope[_-]scaling|speculative|lora|max[_-]seq[_-]len|context length|"
        r"parallel[_-]size|enforce[_-]eager|engine args|sampling param)[^\n]*"
        r"(must|should|invalid|not supported|unsupported|cannot|can't|only|expected|require|"
        r"not allowed|not (a )?valid|unknown|unrecognized|conflict|mutually exclusive|"
        r"exceed|greater than|less than|at least|at most|divisible|out of range|not set|"
        r"deprecat|ignored)|"
        r"(invalid|unsupported|unknown|unrecognized) (value|choice|argument|option|config|"
        r"setting|parameter)|mutually exclusive|cannot be used (with|together)|"
        r"unrecognized arguments|expected one argument|invalid choice|"
        # vLLM 0.8 refusing `vllm serve --model`
        r"provide the model as a positional argument",
        classes=("ArgumentError", "ArgumentTypeError", "ConfigError", "ValidationError"),
    ),
)


def classify(text: str, exception: str) -> tuple[str, str] | None:
    """(family, cause) of a message by RULES, the cause `not_a_cause` for advice; None outside
    every family."""
    for rule in RULES:
        if rule.matches(text, exception):
            advice = exception in NOT_A_CAUSE_CLASSES or NOT_A_CAUSE.search(text) is not None
            return rule.family, "not_a_cause" if advice else rule.cause
    return None


def place(producer: Producer, text: str, exception: str) -> tuple[str, str] | None:
    """(family, cause) of a producer's message: by RULES, else by the producer's own rules, else
    the producer's default."""
    placed = classify(text, exception)
    for family, cause, words in () if placed is not None else producer.rules:
        if Rule(family, cause, words).matches(text, exception):
            advice = exception in NOT_A_CAUSE_CLASSES or NOT_A_CAUSE.search(text) is not None
            placed = family, "not_a_cause" if advice else cause
            break
    if placed is None and producer.default is not None:
        family, cause = producer.default
        advice = exception in NOT_A_CAUSE_CLASSES or NOT_A_CAUSE.search(text) is not None
        placed = family, "not_a_cause" if advice else cause
    return placed


def too_generic(text: str) -> bool:
    """A message too generic to be evidence: short once its placeholders are removed, or fewer
    than three words."""
    if _ERROR_NAME.match(text):
        return len(text) < MIN_CHARS
    bare = text.replace("{}", "").strip(" :.,;-_'\"()[]")
    return len(bare) < MIN_CHARS or len(re.findall(r"[A-Za-z]{2,}", bare)) < 3


# --- the catalogue -------------------------------------------------------------------------------

_KIND_ORDER = {"raise": 0, "log": 1, "native": 2}


@dataclass
class Entry:
    message: str
    kind: str
    exception: str
    level: str
    file: str
    versions: list[str]
    family: str
    cause: str


def merge(producer: Producer, extractions: Iterable[Extraction]) -> list[Entry]:
    """One entry per distinct message of the producer: the versions it appears in merged, its
    kind, class or level and file those of its first occurrence (raise before log before native,
    then by class, level and file) in the newest version holding it; sorted by family, text."""
    order = {version: index for index, version in enumerate(producer.versions)}
    by_text: dict[str, dict[str, list[Found]]] = {}
    for extraction in extractions:
        for item in extraction.found:
            text = clean(item.message)
            if not text or too_generic(text):
                continue
            by_text.setdefault(text, {}).setdefault(extraction.version, []).append(item)
    entries: list[Entry] = []
    for text, per_version in by_text.items():
        versions = sorted(per_version, key=lambda v: order.get(v, len(order)))
        newest = min(
            per_version[versions[-1]],
            key=lambda f: (_KIND_ORDER[f.kind], f.exception, f.level, f.file),
        )
        placed = place(producer, text, newest.exception)
        if placed is None:
            continue
        family, cause = placed
        entries.append(
            Entry(
                text,
                newest.kind,
                newest.exception,
                newest.level,
                newest.file,
                versions,
                family,
                cause,
            )
        )
    entries.sort(key=lambda e: (e.family, e.message.lower(), e.message))
    if len(entries) > MAX_PER_PRODUCER:
        # keep the errors over the warnings, then those of most versions, then by text
        ranked = sorted(
            entries,
            key=lambda e: (e.kind == "log" and e.level == "warning", -len(e.versions), e.message),
        )
        kept = {id(e) for e in ranked[:MAX_PER_PRODUCER]}
        entries = [e for e in entries if id(e) in kept]
    return entries


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(text, ensure_ascii=False)


def render_yaml(producer: Producer, versions: list[str], entries: list[Entry], as_of: str) -> str:
    """The producer's catalogue file (deterministic: sorted, one entry per message)."""
    lines = [
        f"# Failure messages of {producer.name}, extracted by scripts/message_catalogue.py",
        "# (generated: do not edit by hand; run the script again). family and cause follow the",
        "# script's RULES; an empty cause is a family whose messages do not decide it alone.",
        f"producer: {_q(producer.name)}",
        f"as_of: {_q(as_of)}",
        "certainty: primary",
        "source:",
        *[f"  - {_q(source_url(producer, version))}" for version in versions],
        f"versions: [{', '.join(_q(v) for v in versions)}]",
        f"method: {_q(_method(producer, versions))}",
        "messages:",
    ]
    for e in entries:
        parts = [f"message: {_q(e.message)}", f"kind: {e.kind}"]
        if e.exception:
            parts.append(f"exception: {_q(e.exception)}")
        if e.level:
            parts.append(f"level: {e.level}")
        parts.append(f"file: {_q(e.file)}")
        parts.append(f"versions: [{', '.join(_q(v) for v in e.versions)}]")
        parts.append(f"family: {e.family}")
        parts.append(f"cause: {_q(e.cause)}")
        lines.append("  - {" + ", ".join(parts) + "}")
    return "\n".join(lines) + "\n"


def _method(producer: Producer, versions: list[str] | None = None) -> str:
    """What was read of the versions read (all of the producer's by default), and how."""
    versions = list(producer.versions) if versions is None else versions
    cited = [v for v in cited_commits(producer) if v in versions]
    own = [v for v in own_versions(producer) if v in versions]
    parts = [_own_method(producer, own)] if own else []
    if cited:
        files = sorted({item.file for item in producer.cited if item.commit in cited})
        parts.append(
            f"wording cited from {len(files)} named file(s) of the public repository "
            f"github.com/{producer.cited_repository} at {', '.join(cited)} (each file read at "
            "its commit; scripts/cited_wording.yaml lists each message verbatim as the file "
            "prints it, a runtime value or printf/format specifier as {}, with its kind, class "
            "or level and file)"
        )
    return "; and ".join(parts)


def _own_method(producer: Producer, own: list[str]) -> str:
    read = []
    if producer.go_sources:
        read.append("Go sources (error values, panics and logger calls at warn level and above)")
    if producer.rust_sources:
        read.append(
            "Rust sources (thiserror #[error], anyhow!, bail!, context, panic!, expect, "
            "error!/warn!)"
        )
    if producer.python:
        read.append("Python sources (ast: raise, logger and warnings calls)")
    if producer.c_sources:
        read.append("C/C++/CUDA sources (log, abort, throw and check macros)")
    if producer.native:
        read.append("printable strings of native libraries (error-like, native_filter)")
    kind = "sdist" if producer.sdist else "wheel (manylinux x86_64, CPython 3.12)"
    if producer.repository:
        pairs = zip(producer.versions, _tags(producer), strict=True)
        tags = [f"{v} (tag {t})" if t else v for v, t in pairs if v in own]
        kind = f"git tree of github.com/{producer.repository} at {', '.join(tags)}"
    return f"{kind}: {'; '.join(read)}; extractor v{EXTRACTOR_VERSION}"


def _tags(producer: Producer) -> list[str]:
    return [*producer.tags, *[""] * len(producer.versions)][: len(producer.versions)]


def build(
    extractions: dict[str, list[Extraction]],
    producers: Iterable[Producer],
    out: Path,
    as_of: str,
) -> dict[str, list[Entry]]:
    """Write one file per producer that has releases; the entries written, by producer."""
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Entry]] = {}
    for producer in producers:
        done = extractions.get(producer.name)
        if not done:
            continue
        versions = [v for v in producer.versions if any(e.version == v for e in done)]
        entries = merge(producer, done)
        (out / f"{producer.name}.yaml").write_text(
            render_yaml(producer, versions, entries, as_of), encoding="utf-8"
        )
        written[producer.name] = entries
    return written


def _summary(written: dict[str, list[Entry]], extractions: dict[str, list[Extraction]]) -> None:
    for name, entries in sorted(written.items()):
        families: dict[str, int] = {}
        for entry in entries:
            families[entry.family] = families.get(entry.family, 0) + 1
        raw = sum(len(e.found) for e in extractions.get(name, []))
        unparsed = sum(e.unparsed for e in extractions.get(name, []))
        shown = ", ".join(f"{k} {v}" for k, v in sorted(families.items()))
        print(
            f"{name}: {len(entries)} messages (of {raw} found, {unparsed} unparsed files): {shown}"
        )


# Every producer with the wording cited for it (cited_wording.yaml, beside this script).
PRODUCERS = with_cited(PRODUCERS, load_cited(CITED_FILE))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "step", nargs="?", default="all", choices=["download", "extract", "build", "all"]
    )
    parser.add_argument("--cache", type=Path, default=CACHE_DIR)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--producer", action="append", default=[])
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument(
        "--repo-dir",
        action="append",
        default=[],
        metavar="NAME=GITDIR",
        help="the git directory (or clone) of a repository producer, by name or owner/name",
    )
    args = parser.parse_args(argv)
    repo_dirs: dict[str, Path] = {}
    for item in args.repo_dir:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            parser.error(f"--repo-dir {item}: expected NAME=GITDIR")
        repo_dirs[name] = Path(folder).expanduser()
    for producer in PRODUCERS:
        if producer.repository and not all(_COMMIT.match(v) for v in producer.versions):
            parser.error(f"{producer.name}: a repository producer's versions are 40-hex commits")
    cache = args.cache.expanduser().resolve()
    if cache == ROOT or ROOT in cache.parents:
        parser.error("the cache must be outside the repository")
    chosen = [p for p in PRODUCERS if not args.producer or p.name in args.producer]
    if args.step in {"download", "all"}:
        for line in download(cache, chosen):
            print(f"not downloaded: {line}", file=sys.stderr)
    if args.step in {"extract", "build", "all"}:
        extractions = extract(cache, chosen, repo_dirs)
        if args.step in {"build", "all"}:
            written = build(extractions, chosen, args.out, args.date)
            _summary(written, extractions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
