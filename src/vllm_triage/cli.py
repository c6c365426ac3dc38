"""The command line: parse, call one library function, render. Each command imports what it
needs when it runs, so `--help` and the small commands start fast. Exit codes are a contract and
live in vllm_triage.errors (0 ok, 1 no-go, 2 bad input, 3 broken knowledge, 70 a bug, 130
interrupted); every error a user sees is one line on stderr, whichever way the command ends.

No `from __future__ import annotations` here: typer reads every command's annotations at each
start, and evaluating them once when the module loads costs a fraction of typer evaluating them
from strings (names only needed for type checking are quoted instead).
"""

import atexit
import gc
import os
import sys

# Pydantic looks for plugins in every installed distribution's entry points the first time it
# builds a schema (a fifth of a second on a full environment); the tool uses none, and typer turns
# them off for its own adapters the same way. Before any pydantic import, and only if unset.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperGroup

from vllm_triage import __version__
from vllm_triage.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NO_GO,
    EXIT_OK,
    InputError,
    TriageError,
)
from vllm_triage.validate.deadlines import DEFAULT_DEADLINES

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console, RenderableType

    from vllm_triage.i18n import Language
    from vllm_triage.validate import ValidateResult

Model = TypeVar("Model", bound="BaseModel")

TRACEBACK_ENV = "VLLM_TRIAGE_TRACEBACK"
# A launch command is a few KiB; Linux caps a whole command line (and environment) at 2 MiB.
MAX_TEXT_ARGUMENT_BYTES = 2 * 1024**2


class _OneLineErrors(TyperGroup):
    """The root command: every way a command can fail ends in one line and a documented code,
    the same under the console script and under typer's CliRunner (tests run it in-process)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> NoReturn:
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except TriageError as exc:
            _fail(str(exc), exc.exit_code)
        except (KeyboardInterrupt, typer.Abort):
            _fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:  # `vllm-triage ... | head`: the reader left, nothing is wrong
            sys.stderr.close()
            sys.exit(EXIT_OK)
        except typer.TyperException as exc:  # usage: unknown option, missing argument
            _fail(f"{exc.format_message()} (see --help)", exc.exit_code)
        except Exception as exc:  # a bug: still one line for the user, the traceback on request
            if os.environ.get(TRACEBACK_ENV):
                raise
            _fail(
                f"internal error (a bug in vllm-triage, please report it): {type(exc).__name__}: "
                f"{exc} (set {TRACEBACK_ENV}=1 to see the traceback)",
                EXIT_INTERNAL,
            )
        sys.exit(code if isinstance(code, int) else EXIT_OK)


def _fail(message: str, code: int) -> NoReturn:
    print(f"vllm-triage: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)


# Help is plain text (rich_markup_mode=None): typer's rich help imports rich's markdown, syntax
# and traceback modules, which would double the time `--help` takes.
app = typer.Typer(
    name="vllm-triage",
    help="Triage vLLM bring-up failures: driver thresholds, log diagnosis, recovery.",
    cls=_OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
knowledge_app = typer.Typer(
    help="Inspect and validate the knowledge base.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(knowledge_app, name="knowledge")
case_app = typer.Typer(
    help="The case folder: what it holds, the next step.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(case_app, name="case")
baseline_app = typer.Typer(
    help="A node's state before a change, compared after it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(baseline_app, name="baseline")
fleet_app = typer.Typer(
    help="Which GPU nodes can run an image, in which waves to change the rest; the tool across "
    "many hosts.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(fleet_app, name="fleet")
# Where the commands that make an artifact write it (vllm_triage.case.case_folder decides).
_CASE = "Default: $VLLM_TRIAGE_CASE, else ./triage."


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _emit(
    artifact: "BaseModel",
    output_format: OutputFormat,
    markdown: Callable[[Any], str],
    renderable: "Callable[[Any], RenderableType]",
) -> None:
    """Print an artifact as JSON (for scripts), markdown (for tickets) or rich text (for people);
    the foreign text it quotes is made printable first (no surrogates, no terminal controls)."""
    from vllm_triage.render.printable import printable

    safe = printable(artifact, terminal=output_format is not OutputFormat.json)
    if output_format is OutputFormat.json:
        print(safe.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        print(markdown(safe), end="")
    else:
        _console().print(renderable(safe))


def _console(stderr: bool = False) -> "Console":
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _version(value: bool) -> None:
    if value:
        print(f"vllm-triage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """vllm-triage: freeze the evidence, find the cause, plan the recovery."""


# --image on any command: the config from the local engine or the registry (vllm_triage.image).
RegistryAuthOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="Docker config.json whose auths hold credentials for a private registry "
        "(read, never written or printed).",
    ),
]
PlatformOption = Annotated[
    str | None,
    typer.Option(
        metavar="OS/ARCH",
        help="Platform to pick from a multi-arch image, e.g. linux/arm64 (default: this host's).",
    ),
]


@contextmanager
def _image_inputs(
    image: str | None, image_config: Path | None, registry_auth: Path | None, platform: str | None
) -> "Iterator[tuple[Path | None, str | None]]":
    """The (image config file, image reference) a command passes on: --image resolved once
    (vllm_triage.image.image_inputs; the image package is imported only then), with a line on
    stderr saying where its config came from, pinned to its digest, and any warning."""
    if image is None or image_config is not None:
        yield image_config, image
        return
    from vllm_triage.image import ImageRequest, describe, image_inputs

    request = ImageRequest(image, None, registry_auth, platform)
    with image_inputs(request) as found:
        if found.resolved is not None:
            for line in (describe(found.resolved), *found.resolved.warnings):
                print(f"vllm-triage: {' '.join(line.split())}", file=sys.stderr)
        yield found.image_config, found.image


@app.command()
def compat(
    driver: Annotated[str, typer.Option(help="Host NVIDIA driver version, e.g. 575.57.08.")],
    cuda: Annotated[str | None, typer.Option(help="CUDA of the build, e.g. 13.0 or cu130.")] = None,
    gpu: Annotated[
        str | None,
        typer.Option(help='GPU name as nvidia-smi prints it, e.g. "NVIDIA H100 80GB HBM3".'),
    ] = None,
    image_config: Annotated[
        Path | None, typer.Option(help="Image config JSON (docker image inspect output).")
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            metavar="REF",
            help="Image reference, e.g. vllm/vllm-openai:kimi-k3: its config from the local "
            "engine or the registry (the tag only as a fallback).",
        ),
    ] = None,
    registry_auth: RegistryAuthOption = None,
    platform: PlatformOption = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Can a CUDA build run on this driver? compatible / conditional / forward_compat_only / incompatible."""
    from vllm_triage.diagnose import CompatOptions
    from vllm_triage.diagnose import compat as compat_verdict
    from vllm_triage.render.markdown import compat_markdown
    from vllm_triage.render.text import compat_renderable

    with _image_inputs(None if cuda else image, image_config, registry_auth, platform) as found:
        verdict = compat_verdict(CompatOptions(driver, cuda, gpu, *found))
    _emit(verdict, output_format, compat_markdown, compat_renderable)
    if verdict.verdict in ("forward_compat_only", "incompatible"):
        raise typer.Exit(EXIT_NO_GO)


@app.command()
def collect(
    container: Annotated[
        str | None, typer.Option(help="Name or id of the failed container (never restarted).")
    ] = None,
    pod: Annotated[str | None, typer.Option(help="Name of the failed pod.")] = None,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The pod's namespace.")] = (
        "default"
    ),
    log: Annotated[
        list[Path] | None, typer.Option(help="A log file to include (repeatable).")
    ] = None,
    launch_cmd: Annotated[
        str | None, typer.Option(help="File with the launch command, or - for stdin.")
    ] = None,
    image: Annotated[str | None, typer.Option(help="Image reference, for its config.")] = None,
    model_path: Annotated[
        str | None, typer.Option(help="Model folder (as the container sees it, if any).")
    ] = None,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Case folder: the bundle goes into its bundles/. " + _CASE
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds the probes may take; the whole run, bundle written, ends within this plus 10 s."
        ),
    ] = 10.0,
    probe_image: Annotated[
        bool,
        typer.Option(help="Start a throwaway container without GPUs to read torch/vLLM versions."),
    ] = False,
    host_root: Annotated[
        Path, typer.Option(help="Where the host's / is mounted (e.g. /host in a node debug pod).")
    ] = Path("/"),
    engine: Annotated[
        str | None, typer.Option(help="Container engine: docker or podman (default: found).")
    ] = None,
    show_commands: Annotated[
        bool, typer.Option(help="Print the allow-list of commands collect may run, and exit.")
    ] = False,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Freeze the evidence of a failed start once, redacted, into a bundle (folder + .tar.gz)."""
    from vllm_triage.case import case_folder
    from vllm_triage.collect import CollectOptions
    from vllm_triage.collect import collect as collect_bundle
    from vllm_triage.render.collect import allow_list_renderable, collect_renderable

    if show_commands:
        _console().print(allow_list_renderable())
        return
    if engine not in (None, "docker", "podman"):
        raise InputError(f"--engine must be docker or podman, not {engine!r}")
    options = CollectOptions(
        container=container,
        pod=pod,
        namespace=namespace,
        logs=tuple(log or ()),
        launch_cmd=_read_text_argument(launch_cmd, "--launch-cmd"),
        image=image,
        model_path=model_path,
        probe_image=probe_image,
        timeout=timeout,
        host_root=host_root,
        engine=engine,
        case=case_folder(case),
    )
    with _console().status(f"collecting (each probe at most {timeout:g} s)"):
        result = collect_bundle(options)
    if output_format is OutputFormat.json:
        print(result.manifest.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        from vllm_triage.render.collect import collect_markdown
        from vllm_triage.render.printable import printable

        print(collect_markdown(printable(result, terminal=True)), end="")
    else:
        _console().print(collect_renderable(result))


def _read_text_argument(value: str | None, option: str) -> str | None:
    """The text of a FILE|- option (a launch command), read up to a cap."""
    from vllm_triage.inputs import read_text_input

    if value is None:
        return None
    return read_text_input(value, option, "a launch command file", MAX_TEXT_ARGUMENT_BYTES)


@app.command()
def diagnose(
    logs: Annotated[
        list[str] | None, typer.Argument(help="Log files of the failed start; - for stdin.")
    ] = None,
    driver: Annotated[str | None, typer.Option(help="Host NVIDIA driver version.")] = None,
    image_cuda: Annotated[str | None, typer.Option(help="CUDA of the image, e.g. 13.0.")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU name as nvidia-smi prints it.")] = None,
    recipe: Annotated[str | None, typer.Option(help="Model recipe, e.g. kimi-k3.")] = None,
    image_config: Annotated[
        Path | None, typer.Option(help="Image config JSON, for the image's CUDA.")
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            metavar="REF",
            help="Image reference, for the image's CUDA: its config from the local engine or "
            "the registry (the tag only as a fallback).",
        ),
    ] = None,
    registry_auth: RegistryAuthOption = None,
    platform: PlatformOption = None,
    bundle: Annotated[
        Path | None,
        typer.Option(help="A collect bundle (folder, .tar.gz, or a case folder) to read."),
    ] = None,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: the diagnosis goes into its diagnosis.json and .md (an earlier one "
            "into history/); with no logs and no --bundle, its newest bundle is read. " + _CASE,
        ),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Also print the decision: every rule that matched, its tier and phase, and why "
            "the primary cause won over each other candidate (JSON always carries it).",
        ),
    ] = False,
    lang: Annotated[
        str | None,
        typer.Option(help="Language of the text and markdown: en, ko or ja (default: the locale)."),
    ] = None,
) -> None:
    """What went wrong, in which phase, with the log lines that prove it, and what not to do."""
    from functools import partial

    from vllm_triage.case import Case, case_folder
    from vllm_triage.diagnose import DiagnoseOptions
    from vllm_triage.diagnose import diagnose as diagnose_logs
    from vllm_triage.i18n import resolve_language
    from vllm_triage.render.markdown import diagnosis_markdown
    from vllm_triage.render.text import diagnosis_renderable

    language = resolve_language(lang)
    folder = case_folder(case)
    chosen = None if image_cuda else image
    with _image_inputs(chosen, image_config, registry_auth, platform) as (config, reference):
        options = DiagnoseOptions(
            tuple(logs or ()), driver, image_cuda, gpu, recipe, config, reference, bundle, folder
        )
        result = _for_the_case(diagnose_logs(options))
    written = Case(folder).save_diagnosis(result, diagnosis_markdown(result, language=language))
    _emit(
        result,
        output_format,
        partial(diagnosis_markdown, explain=explain, language=language),
        partial(diagnosis_renderable, explain=explain, language=language),
    )
    _say_saved(output_format, written)


def _for_the_case(artifact: Model) -> Model:
    """An artifact as the case keeps it (and the command prints it): redacted, as everything the
    tool writes is, and printable (no lone surrogates)."""
    from vllm_triage.redact import Redactor
    from vllm_triage.render.printable import printable

    return Redactor().model(printable(artifact, terminal=False))


def _say_saved(output_format: OutputFormat, paths: Sequence[Path]) -> None:
    """Where the artifact went, under the text output (JSON and markdown stay pure)."""
    from rich.text import Text

    from vllm_triage.inputs import display_name

    if output_format is OutputFormat.text:
        _console().print(Text(f"case     {', '.join(display_name(p) for p in paths)}"))


@app.command("prefix-check")
def prefix_check(
    requests: Annotated[
        str,
        typer.Argument(
            metavar="REQUESTS.jsonl", help="OpenAI chat request bodies, one a line; - for stdin."
        ),
    ],
    launch_cmd: Annotated[
        str | None,
        typer.Option(metavar="FILE|-", help="The launch command, to check prefix caching is on."),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            metavar="PATH", help="Local tokenizer folder: tokens with the model's chat template."
        ),
    ] = None,
    trust_remote_code: Annotated[
        bool, typer.Option(help="Let the tokenizer folder run its own code (e.g. Kimi's).")
    ] = False,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Case folder: the report goes into its prefix-check/. " + _CASE
        ),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Why a sample of requests would not share the prefix cache, and the share they could."""
    from vllm_triage.case import Case, case_folder
    from vllm_triage.prefix import PrefixCheckOptions
    from vllm_triage.prefix import prefix_check as prefix_check_requests
    from vllm_triage.render.markdown import prefix_markdown
    from vllm_triage.render.prefix_check import prefix_renderable

    if requests == "-" and launch_cmd == "-":
        raise InputError("REQUESTS and --launch-cmd cannot both read standard input")
    options = PrefixCheckOptions(
        requests,
        _read_text_argument(launch_cmd, "--launch-cmd"),
        tokenizer,
        trust_remote_code=trust_remote_code,
    )
    report = _for_the_case(prefix_check_requests(options))
    written = Case(case_folder(case)).save_prefix_check(report)
    _emit(report, output_format, prefix_markdown, prefix_renderable)
    _say_saved(output_format, [written])


@app.command("capacity")
def capacity_command(
    model: Annotated[str, typer.Option(metavar="PATH", help="Model folder, or its config.json.")],
    weights_bytes: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="The weights' total bytes (default: model.safetensors.index.json, the "
            "*.safetensors files, or the config's parameter count).",
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(metavar="NAME", help='GPU model, e.g. B200, "H100 80GB", "NVIDIA H100 NVL".'),
    ] = None,
    gpu_count: Annotated[
        int | None,
        typer.Option(metavar="N", help="GPUs there are (default: what the launch uses)."),
    ] = None,
    gpu_memory_gib: Annotated[
        float | None,
        typer.Option(metavar="GIB", help="One GPU's memory, for a GPU not in the table."),
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(help="A collect bundle (or case folder): its GPUs, launch and model size."),
    ] = None,
    launch_cmd: Annotated[
        str | None,
        typer.Option(
            metavar="FILE|-", help="The vLLM launch command; the flags below override it."
        ),
    ] = None,
    tensor_parallel_size: Annotated[
        int | None, typer.Option("--tensor-parallel-size", "-tp", metavar="N")
    ] = None,
    pipeline_parallel_size: Annotated[
        int | None, typer.Option("--pipeline-parallel-size", "-pp", metavar="N")
    ] = None,
    data_parallel_size: Annotated[
        int | None, typer.Option("--data-parallel-size", "-dp", metavar="N")
    ] = None,
    decode_context_parallel_size: Annotated[
        int | None, typer.Option("--decode-context-parallel-size", "-dcp", metavar="N")
    ] = None,
    enable_expert_parallel: Annotated[
        bool | None, typer.Option("--enable-expert-parallel/--no-enable-expert-parallel")
    ] = None,
    max_model_len: Annotated[
        int | None, typer.Option(metavar="N", help="Default: the model's own maximum.")
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None, typer.Option(metavar="F", help="Default: 0.9, as vLLM.")
    ] = None,
    kv_cache_dtype: Annotated[
        str | None, typer.Option(metavar="D", help="auto (the model's dtype), fp8, ...")
    ] = None,
    quantization: Annotated[
        str | None, typer.Option(metavar="METHOD", help="Online quantisation, e.g. fp8.")
    ] = None,
    dtype: Annotated[str | None, typer.Option(metavar="D", help="Default: auto.")] = None,
    kv_cache_memory_bytes: Annotated[
        int | None, typer.Option(metavar="N", help="The KV cache per GPU, given outright.")
    ] = None,
    concurrency: Annotated[
        int, typer.Option(metavar="N", help="Requests of --max-model-len at once.")
    ] = 1,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Will the model fit? Weights per GPU, KV bytes per token, KV tokens, max context (an estimate)."""
    from vllm_triage.capacity import CapacityOptions, capacity
    from vllm_triage.render.capacity import capacity_markdown, capacity_renderable

    options = CapacityOptions(
        model,
        weights_bytes=weights_bytes,
        gpu=gpu,
        gpu_count=gpu_count,
        gpu_memory_gib=gpu_memory_gib,
        bundle=bundle,
        launch=_read_text_argument(launch_cmd, "--launch-cmd"),
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size,
        decode_context_parallel_size=decode_context_parallel_size,
        enable_expert_parallel=enable_expert_parallel,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_dtype=kv_cache_dtype,
        quantization=quantization,
        dtype=dtype,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        concurrency=concurrency,
    )
    estimate = capacity(options)
    _emit(estimate, output_format, capacity_markdown, capacity_renderable)
    if estimate.verdict == "does_not_fit":
        raise typer.Exit(EXIT_NO_GO)


@app.command("preflight")
def preflight_command(
    image: Annotated[
        str | None, typer.Option(metavar="REF", help="The image the server will run.")
    ] = None,
    image_config: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="The image's config (docker image inspect, or OCI)."),
    ] = None,
    registry_auth: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="A docker config.json for a private registry."),
    ] = None,
    recipe: Annotated[
        str | None, typer.Option(help="Model recipe, e.g. kimi-k3 (default: the launch's model's).")
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="The recipe's serving profile (default: its default).")
    ] = None,
    launch_cmd: Annotated[
        str | None, typer.Option(metavar="FILE|-", help="The vLLM launch command.")
    ] = None,
    model_path: Annotated[
        Path | None, typer.Option(metavar="PATH", help="The model folder, as this node sees it.")
    ] = None,
    container_user: Annotated[
        str | None,
        typer.Option(
            metavar="UID[:GID]",
            help="The server's user (default: the launch's --user, the image's User, root).",
        ),
    ] = None,
    driver: Annotated[
        str | None, typer.Option(help="Host driver version (default: nvidia-smi).")
    ] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU name (default: nvidia-smi).")] = None,
    gpu_count: Annotated[
        int | None, typer.Option(metavar="N", help="GPUs on the node (default: nvidia-smi).")
    ] = None,
    shm_size: Annotated[
        str | None,
        typer.Option(metavar="SIZE", help="The container's /dev/shm, e.g. 16g (default: statvfs)."),
    ] = None,
    transport: Annotated[
        str | None,
        typer.Option(help="rdma or nvlink, for the all-to-all backend (default: detected)."),
    ] = None,
    host_root: Annotated[
        Path, typer.Option(help="Where the host's / is mounted (for /dev, /etc/cdi, /sys).")
    ] = Path("/"),
    timeout: Annotated[float, typer.Option(help="Seconds each host command may take.")] = 15.0,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Before a start: go (exit 0) or no-go (exit 1, one line per failed check and what to do)."""
    from vllm_triage.preflight import PreflightOptions, preflight
    from vllm_triage.render.preflight import preflight_markdown, preflight_text
    from vllm_triage.render.printable import printable

    options = PreflightOptions(
        image=image,
        image_config=image_config,
        registry_auth=registry_auth,
        recipe=recipe,
        profile=profile,
        launch=_read_text_argument(launch_cmd, "--launch-cmd"),
        model_path=model_path,
        container_user=container_user,
        driver=driver,
        gpu=gpu,
        gpu_count=gpu_count,
        shm_size=shm_size,
        transport=transport,
        host_root=host_root,
        timeout=timeout,
    )
    result = printable(preflight(options), terminal=output_format is not OutputFormat.json)
    if output_format is OutputFormat.json:
        print(result.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        print(preflight_markdown(result), end="")
    else:
        print(preflight_text(result), end="")
    if not result.go:
        raise typer.Exit(EXIT_NO_GO)


@app.command()
def validate(
    url: Annotated[str, typer.Argument(help="The server, e.g. http://127.0.0.1:8000.")],
    model: Annotated[str | None, typer.Option(help="Model id (default: the first served).")] = None,
    target_context: Annotated[
        int | None, typer.Option(help="Prompt tokens for rung 3 (default: max_model_len - output).")
    ] = None,
    max_concurrency: Annotated[int, typer.Option(help="Highest level of the ramp.")] = 8,
    recipe: Annotated[str | None, typer.Option(help="Model recipe, e.g. kimi-k3.")] = None,
    profile: Annotated[
        str | None,
        typer.Option(help="The recipe's serving profile, e.g. pd-decode (default: its default)."),
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable that holds the API key.")
    ] = None,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: the run (records and summary) goes into its runs/<UTC>/. " + _CASE,
        ),
    ] = None,
    keep_going: Annotated[bool, typer.Option(help="Run every rung, even after a failure.")] = False,
    launch_cmd: Annotated[
        str | None, typer.Option(help="File with the launch command (prefix caching, multi-node).")
    ] = None,
    multi_node: Annotated[bool, typer.Option(help="Run the multi-node rung.")] = False,
    log: Annotated[
        list[Path] | None, typer.Option(help="Server log to check for NCCL errors (multi-node).")
    ] = None,
    transport: Annotated[
        str | None, typer.Option(help="rdma or nvlink: the all-to-all transport (multi-node).")
    ] = None,
    nccl_test: Annotated[
        str | None, typer.Option(help="An NCCL test command to run and parse (multi-node).")
    ] = None,
    deadline: Annotated[
        list[str] | None,
        typer.Option(
            metavar="RUNG=SECONDS",
            help="A rung's total deadline (repeatable; RUNG `all` sets every rung). Defaults: "
            + ", ".join(f"{name} {seconds:g}" for name, seconds in DEFAULT_DEADLINES.items())
            + ".",
        ),
    ] = None,
    loose_tools: Annotated[
        bool,
        typer.Option(
            help="Send the tools without `strict: true`, as most agents do (default: strict)."
        ),
    ] = False,
    start_cmd: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help="File with the command that starts the server (run without a shell; NAME=VALUE "
            "words before it set its environment). validate starts the server --starts times, "
            "times each engine initialisation, stops it (SIGTERM, then SIGKILL), diagnoses a "
            "failed start, and runs the ladder on the last start. Use it only on a node you name "
            "as isolated (no service traffic): it starts and stops a server there.",
        ),
    ] = None,
    starts: Annotated[
        int | None,
        typer.Option(metavar="N", help="How many starts with --start-cmd (default 1, at most 20)."),
    ] = None,
    start_deadline: Annotated[
        float,
        typer.Option(metavar="SECONDS", help="Per start: the most seconds until /health answers."),
    ] = 1200.0,
    compare_endpoint: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="A second endpoint (e.g. the isolated environment against the upgraded node): "
            "the same requests replayed against it, the rungs side by side in the summary.",
        ),
    ] = None,
    compare_api_key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable with the second endpoint's API key (its own)."),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Prove a running server works, rung by rung; exit 0 all passed, 1 a rung failed (or a
    start, or the compared endpoint), 2 bad input or unreachable server."""
    from rich.text import Text

    from vllm_triage.case import case_folder
    from vllm_triage.render.validate import rung_line
    from vllm_triage.validate import ValidateOptions, ValidationInterrupted
    from vllm_triage.validate import validate as run_validate
    from vllm_triage.validate.deadlines import parse_deadlines
    from vllm_triage.validate.models import RungName, RungResult

    options = ValidateOptions(
        url=url,
        model=model,
        target_context=target_context,
        max_concurrency=max_concurrency,
        recipe=recipe,
        profile=profile,
        api_key_env=api_key_env,
        case=case_folder(case),
        keep_going=keep_going,
        launch_cmd=_read_text_argument(launch_cmd, "--launch-cmd"),
        multi_node=multi_node,
        logs=tuple(log or ()),
        transport=transport,
        nccl_test=nccl_test,
        deadlines=parse_deadlines(deadline or ()),
        loose_tools=loose_tools,
        start_cmd=_read_text_argument(start_cmd, "--start-cmd"),
        starts=starts,
        start_deadline_s=start_deadline,
        compare_url=compare_endpoint,
        compare_api_key_env=compare_api_key_env,
    )
    show = output_format is OutputFormat.text
    err = _console(stderr=True)
    running = err.status("")

    def progress(name: RungName, result: RungResult | None) -> None:
        """A spinner while a rung runs (on a terminal), its line when it ends."""
        if not show:
            return
        if result is None:
            running.update(f"{name}: running (deadline {options.deadlines[name]:g} s)")
            running.start()
        else:
            running.stop()
            err.print(rung_line(result))

    def notice(line: str) -> None:
        """A line per start and per endpoint (on a terminal)."""
        if show:
            running.stop()
            err.print(Text(line))

    try:
        result = run_validate(options, progress=progress, notice=notice)
    except ValidationInterrupted as stop:
        running.stop()
        _print_validation(stop.result, output_format)
        raise KeyboardInterrupt from None
    _print_validation(result, output_format)
    if result.unreachable:
        raise typer.Exit(EXIT_BAD_INPUT)
    comparison = result.run.comparison
    if not result.run.passed or (comparison is not None and not comparison.both_passed):
        raise typer.Exit(EXIT_NO_GO)


def _print_validation(result: "ValidateResult", output_format: OutputFormat) -> None:
    from vllm_triage.render.validate import validate_markdown, validate_renderable

    if output_format is OutputFormat.json:
        print(result.run.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        from vllm_triage.render.printable import printable

        print(validate_markdown(printable(result, terminal=True)), end="")
    else:
        _console().print(validate_renderable(result))


_LANG_HELP = "Language of the output: en, ko or ja (default: $VLLM_TRIAGE_LANG, else the locale)."


@case_app.command("show")
def case_show(
    folder: Annotated[
        Path | None, typer.Argument(metavar="[DIR]", help="The case folder. " + _CASE)
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
    lang: Annotated[str | None, typer.Option(help=_LANG_HELP)] = None,
) -> None:
    """What the case holds (each artifact, when, its verdict) and the runbook's next step; an
    artifact that cannot be read is listed as unreadable, the rest still shown (the JSON is in
    English whatever --lang says)."""
    from vllm_triage.case import case_folder
    from vllm_triage.i18n import resolve_language
    from vllm_triage.render.case import case_markdown, case_renderable
    from vllm_triage.runbook import CaseShowOptions
    from vllm_triage.runbook import case_show as show

    language = resolve_language(lang)
    _emit(
        show(CaseShowOptions(case_folder(folder))),
        output_format,
        lambda s: case_markdown(s, language),
        lambda s: case_renderable(s, language),
    )


@baseline_app.command("capture")
def baseline_capture(
    label: Annotated[
        str, typer.Option(help="Name of this baseline, e.g. before (letters, digits, . _ -).")
    ],
    container: Annotated[
        str | None,
        typer.Option(help="The existing model's container: its image's NCCL and its log."),
    ] = None,
    log: Annotated[
        list[Path] | None,
        typer.Option(help="The existing model's log, for NCCL's version and transport."),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            help="A model serving on the node, e.g. http://127.0.0.1:8000: one short request."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model id for --endpoint (default: the first served).")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable that holds --endpoint's API key.")
    ] = None,
    endpoint_timeout: Annotated[
        float, typer.Option(help="Seconds the short request may take, all told.")
    ] = 60.0,
    case: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Case folder: into its baselines/<label>/. " + _CASE),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds the probes may take.")] = 10.0,
    host_root: Annotated[
        Path, typer.Option(help="Where the host's / is mounted (e.g. /host in a node debug pod).")
    ] = Path("/"),
    engine: Annotated[
        str | None, typer.Option(help="Container engine: docker or podman (default: found).")
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
    lang: Annotated[str | None, typer.Option(help=_LANG_HELP)] = None,
) -> None:
    """Save the node's state (driver, GPUs, jobs, kernel, container runtime, NCCL, RDMA, an
    existing model's short request) before a change, or after it."""
    from vllm_triage.baseline import CaptureOptions
    from vllm_triage.baseline import baseline_capture as capture
    from vllm_triage.baseline.capture import previous_label
    from vllm_triage.case import BASELINES, case_folder
    from vllm_triage.i18n import resolve_language
    from vllm_triage.inputs import display_name
    from vllm_triage.render.baseline import capture_markdown, capture_renderable

    language = resolve_language(lang)
    if engine not in (None, "docker", "podman"):
        raise InputError(f"--engine must be docker or podman, not {engine!r}")
    folder = case_folder(case)
    options = CaptureOptions(
        label=label,
        case=folder,
        container=container,
        logs=tuple(log or ()),
        endpoint=endpoint,
        model=model,
        api_key_env=api_key_env,
        endpoint_timeout=endpoint_timeout,
        timeout=timeout,
        host_root=host_root,
        engine=engine,
    )
    with _console(stderr=True).status(f"capturing baseline {label}"):
        result = capture(options)
    shown = display_name(folder / BASELINES / label)
    previous = previous_label(folder, label)
    _emit(
        result,
        output_format,
        lambda b: capture_markdown(b, shown, language, previous),
        lambda b: capture_renderable(b, shown, language, previous),
    )


@baseline_app.command("compare")
def baseline_compare(
    before: Annotated[str, typer.Argument(metavar="A", help="Before: a label, or a folder.")],
    after: Annotated[str, typer.Argument(metavar="B", help="After: a label, or a folder.")],
    expect_driver: Annotated[
        str | None,
        typer.Option(help="The driver the change installs: a version, or a branch (r580)."),
    ] = None,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: labels are its baselines/; the comparison goes into its "
            "baseline-comparison.json and .md. " + _CASE,
        ),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
    lang: Annotated[str | None, typer.Option(help=_LANG_HELP)] = None,
) -> None:
    """Compare two baselines: the expected change (the driver) apart from regressions; exit 1 on
    a regression, 0 otherwise, 2 on bad input."""
    from vllm_triage.baseline import CompareOptions
    from vllm_triage.baseline import baseline_compare as compare
    from vllm_triage.case import Case, case_folder
    from vllm_triage.i18n import resolve_language
    from vllm_triage.render.baseline import comparison_markdown, comparison_renderable

    language = resolve_language(lang)
    folder = case_folder(case)
    result = _for_the_case(compare(CompareOptions(before, after, folder, expect_driver)))
    written = Case(folder).save_artifact(
        "baseline-comparison", result, {".md": comparison_markdown(result, language)}
    )
    _emit(
        result,
        output_format,
        lambda c: comparison_markdown(c, language),
        lambda c: comparison_renderable(c, language),
    )
    _say_saved(output_format, written)
    if result.verdict == "regression":
        raise typer.Exit(EXIT_NO_GO)


def _interactive() -> bool:
    """Whether a person sits at the command: standard input and output are terminals."""
    return sys.stdin.isatty() and sys.stdout.isatty()


class _PlanPrompt:
    """`plan`'s short prompt on a terminal: the question in the reader's language."""

    def __init__(self, language: "Language") -> None:
        from vllm_triage.i18n import catalog

        self.tr = catalog(language)

    def confirm(self, question: str) -> bool:
        return typer.confirm(self.tr(question), err=True)

    def hours(self, question: str) -> float | None:
        from vllm_triage.plan.messages import ASK_DEADLINE_AGAIN

        for _ in range(3):
            answer = typer.prompt(self.tr(question), default="", show_default=False, err=True)
            if not answer.strip():
                return None
            try:
                return float(answer)
            except ValueError:
                typer.echo(self.tr(ASK_DEADLINE_AGAIN), err=True)
        return None


@app.command()
def plan(
    diagnosis: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A diagnosis (what `diagnose --format json` writes) instead of the case's.",
        ),
    ] = None,
    maintenance_window: Annotated[
        bool | None,
        typer.Option(
            "--maintenance-window/--no-maintenance-window",
            help="Whether a maintenance window is available for a driver change.",
            show_default=False,
        ),
    ] = None,
    cluster_can_change: Annotated[
        bool | None,
        typer.Option(
            "--cluster-can-change/--cluster-cannot-change",
            help="Whether the shared cluster may change today.",
            show_default=False,
        ),
    ] = None,
    deadline_hours: Annotated[
        float | None, typer.Option(min=0, help="Recovery deadline, in hours from now.")
    ] = None,
    can_maintain_build: Annotated[
        bool | None,
        typer.Option(
            "--can-maintain-build/--cannot-maintain-build",
            help="Whether the team can keep a custom build reproducible (pinned build script, "
            "PyTorch, FlashInfer, vLLM commit, security updates).",
            show_default=False,
        ),
    ] = None,
    gpu: Annotated[
        str | None, typer.Option(help="GPU name as nvidia-smi prints it (when no bundle says).")
    ] = None,
    driver: Annotated[
        str | None, typer.Option(help="Host driver version (when no bundle says).")
    ] = None,
    nodes: Annotated[
        list[str] | None, typer.Option(help="Target nodes (repeatable, or comma-separated).")
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option(help="Nodes to leave out (repeatable, or comma-separated).")
    ] = None,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: its diagnosis and newest bundle are read, the plan goes into its "
            "plan.json and .md (an earlier one into history/). " + _CASE,
        ),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
    lang: Annotated[str | None, typer.Option(help=_LANG_HELP)] = None,
) -> None:
    """Choose the recovery path under the team's constraints and write the change plan; a
    constraint not given is asked on a terminal, else planned conservatively."""
    from vllm_triage.case import Case, case_folder
    from vllm_triage.i18n import resolve_language
    from vllm_triage.plan import PlanOptions
    from vllm_triage.plan import plan as make_plan
    from vllm_triage.render.plan import plan_markdown, plan_renderable

    language = resolve_language(lang)
    folder = case_folder(case)
    options = PlanOptions(
        case=folder,
        diagnosis=diagnosis,
        maintenance_window=maintenance_window,
        cluster_can_change=cluster_can_change,
        deadline_hours=deadline_hours,
        can_maintain_build=can_maintain_build,
        gpu=gpu,
        driver=driver,
        nodes=tuple(nodes or ()),
        exclude=tuple(exclude or ()),
        ask=_PlanPrompt(language) if _interactive() else None,
    )
    result = _for_the_case(make_plan(options))
    written = Case(folder).save_artifact("plan", result, {".md": plan_markdown(result, language)})
    _emit(
        result,
        output_format,
        lambda p: plan_markdown(p, language),
        lambda p: plan_renderable(p, language),
    )
    _say_saved(output_format, written)


# `vllm-triage record [OPTIONS]` makes the record (the group's own callback); `record check` checks it.
record_app = typer.Typer(rich_markup_mode=None)
app.add_typer(record_app, name="record")


class _RecordPrompt:
    """`record`'s questions on a terminal, in the reader's language."""

    def __init__(self, language: "Language") -> None:
        from vllm_triage.i18n import catalog

        self.tr = catalog(language)

    def confirm(self, question: str) -> bool:
        return typer.confirm(self.tr(question), err=True)

    def name(self, question: str) -> str:
        return str(typer.prompt(self.tr(question), err=True))


@record_app.callback(invoke_without_command=True)
def record(
    ctx: typer.Context,
    adopted: Annotated[
        str | None,
        typer.Option(
            metavar="PATH",
            help="The path the team took: upgrade_driver, custom_build, isolated_env, "
            "forward_compat or no_driver_change (default: the plan's recommendation).",
        ),
    ] = None,
    reason: Annotated[
        str | None, typer.Option(help="The team's own words on why (kept with the plan's).")
    ] = None,
    review_days: Annotated[
        int | None, typer.Option(help="Days until the re-evaluation (default 30).")
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option(help="The model's recipe, whose image triggers are watched (default: found)."),
    ] = None,
    maintenance_acceptable: Annotated[
        bool | None,
        typer.Option(
            "--maintenance-acceptable/--maintenance-not-acceptable",
            help="Whether the maintenance burden of the new environment's driver and "
            "dependencies is acceptable (with --answered-by).",
            show_default=False,
        ),
    ] = None,
    approval_ready: Annotated[
        bool | None,
        typer.Option(
            "--approval-ready/--approval-not-ready",
            help="Whether the rollback package and the change approval are ready "
            "(with --answered-by).",
            show_default=False,
        ),
    ] = None,
    answered_by: Annotated[
        str | None, typer.Option(metavar="NAME", help="Who gave the answers.")
    ] = None,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: its diagnosis, plan, baselines and runs are read, the record goes "
            "into its record.json and .md (an earlier one into history/). " + _CASE,
        ),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
    lang: Annotated[str | None, typer.Option(help=_LANG_HELP)] = None,
) -> None:
    """Write the decision record after the observation period (adopted path, reason, verified
    and unverified scope, comparisons, widening conditions, rollback, re-evaluation); `record
    check` says whether it is due for review."""
    if ctx.invoked_subcommand is not None:  # `record [--case DIR] [--lang L] check ...`
        making = (adopted, reason, review_days, recipe, maintenance_acceptable, approval_ready)
        if any(value is not None for value in (*making, answered_by)):
            raise InputError(
                f"`record {ctx.invoked_subcommand}` does not make a record: give the options "
                "that make one to `vllm-triage record` alone"
            )
        ctx.obj = {"case": case, "lang": lang, "format": output_format}
        return
    from vllm_triage.case import Case, case_folder
    from vllm_triage.i18n import resolve_language
    from vllm_triage.record import RecordOptions
    from vllm_triage.record import record as make_record
    from vllm_triage.render.record import record_markdown, record_renderable

    language = resolve_language(lang)
    folder = case_folder(case)
    options = RecordOptions(
        case=folder,
        adopted=adopted,
        reason=reason,
        review_days=review_days,
        recipe=recipe,
        maintenance_acceptable=maintenance_acceptable,
        approval_ready=approval_ready,
        answered_by=answered_by,
        ask=_RecordPrompt(language) if _interactive() else None,
    )
    result = _for_the_case(make_record(options))
    written = Case(folder).save_artifact(
        "record", result, {".md": record_markdown(result, language)}
    )
    _emit(
        result,
        output_format,
        lambda r: record_markdown(r, language),
        lambda r: record_renderable(r, language),
    )
    _say_saved(output_format, written)


@record_app.command("check")
def record_check(
    ctx: typer.Context,
    registry: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Registry to read the tag lists from, for every image trigger (default: each "
            "trigger's own, e.g. https://registry-1.docker.io).",
        ),
    ] = None,
    deadline: Annotated[
        float, typer.Option(help="Seconds each registry may take to answer, all told.")
    ] = 20.0,
    case: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Case folder: its record.json is checked. " + _CASE),
    ] = None,
    output_format: Annotated[OutputFormat | None, typer.Option("--format")] = None,
    lang: Annotated[str | None, typer.Option(help=_LANG_HELP)] = None,
) -> None:
    """Re-evaluate the record's triggers (the review date, image tags in the registry); exit 1
    when the decision is due for review, 0 when not, 2 on bad input. An unreachable registry
    leaves its trigger unknown."""
    from vllm_triage.case import case_folder
    from vllm_triage.i18n import resolve_language
    from vllm_triage.record import RecordCheckOptions
    from vllm_triage.record import record_check as check
    from vllm_triage.render.record import review_markdown, review_renderable

    given = ctx.obj if isinstance(ctx.obj, dict) else {}  # before `check`: `record --case DIR`
    language = resolve_language(lang if lang is not None else given.get("lang"))
    case = case if case is not None else given.get("case")
    output_format = output_format or given.get("format") or OutputFormat.text
    options = RecordCheckOptions(case=case_folder(case), registry=registry, deadline_s=deadline)
    with _console(stderr=True).status("checking the record's triggers"):
        result = check(options)
    _emit(
        result,
        output_format,
        lambda r: review_markdown(r, language),
        lambda r: review_renderable(r, language),
    )
    if result.due:
        raise typer.Exit(EXIT_NO_GO)


@app.command()
def report(
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: read whole; the page goes into its report.html (an earlier one "
            "into history/). " + _CASE,
        ),
    ] = None,
    lang: Annotated[str | None, typer.Option(help=_LANG_HELP)] = None,
    pdf: Annotated[
        bool, typer.Option(help="Also print the page to report.pdf through headless Chromium.")
    ] = False,
    browser: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help="The Chromium to print with (default: found on PATH)."),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """The whole case as one self-contained HTML page for approvers (and PDF with --pdf)."""
    from vllm_triage.case import case_folder
    from vllm_triage.report import ReportOptions
    from vllm_triage.report import report as make_report

    result = make_report(ReportOptions(case_folder(case), lang, pdf, browser))
    if output_format is OutputFormat.json:
        print(result.model_dump_json(indent=2))
        return
    print(result.path)
    if result.pdf:
        print(result.pdf)
    elif result.stale_pdf:
        print("note: report.pdf is from an earlier report; --pdf prints this one", file=sys.stderr)


@fleet_app.command("scan")
def fleet_scan_command(
    image: Annotated[str | None, typer.Option(metavar="REF", help="The image to roll out.")] = None,
    image_config: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="The image's config (docker image inspect, or OCI)."),
    ] = None,
    cuda: Annotated[
        str | None, typer.Option(metavar="X.Y", help="The image's CUDA, when no config is at hand.")
    ] = None,
    registry_auth: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="A docker config.json for a private registry."),
    ] = None,
    platform: Annotated[
        str | None,
        typer.Option(help="The image's platform, e.g. linux/arm64 (default: this one's)."),
    ] = None,
    kube: Annotated[
        bool, typer.Option("--kube", help="Read the nodes (and their GPU pods) from the cluster.")
    ] = False,
    kubeconfig: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Default: $KUBECONFIG, ~/.kube/config.")
    ] = None,
    context: Annotated[str | None, typer.Option(help="The kubeconfig's context.")] = None,
    selector: Annotated[
        str | None, typer.Option(metavar="S", help="Node label selector, e.g. pool=gpu.")
    ] = None,
    nodes: Annotated[
        Path | None, typer.Option(metavar="FILE", help="kubectl get nodes -o json output.")
    ] = None,
    pods: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="kubectl get pods -A -o json: the GPU work per node."),
    ] = None,
    inventory: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Without Kubernetes: YAML, CSV or Ansible inventory with host vars.",
        ),
    ] = None,
    wave_size: Annotated[int, typer.Option(min=1, help="Nodes per wave after the canary.")] = 10,
    stale_after: Annotated[
        float, typer.Option(metavar="HOURS", help="Labels older than this are stale.")
    ] = 24.0,
    page_size: Annotated[int, typer.Option(min=1, help="Objects per API request.")] = 500,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: the scan goes into its fleet-scan.json and .md. " + _CASE,
        ),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """For every GPU node: ready, forward_compat, needs_upgrade (to which driver) or unknown, and
    the rollout waves (a canary without GPU work first)."""
    from vllm_triage.case import Case, case_folder
    from vllm_triage.fleet import FleetScanOptions, fleet_scan
    from vllm_triage.render.fleet import fleet_scan_markdown, fleet_scan_renderable

    options = FleetScanOptions(
        image=image,
        image_config=image_config,
        cuda=cuda,
        registry_auth=registry_auth,
        platform=platform,
        kube=kube,
        kubeconfig=kubeconfig,
        context=context,
        selector=selector,
        nodes=nodes,
        pods=pods,
        inventory=inventory,
        wave_size=wave_size,
        stale_after_hours=stale_after,
        page_size=page_size,
    )
    result = fleet_scan(options)
    written = Case(case_folder(case)).save_artifact(
        "fleet-scan", result, {".md": fleet_scan_markdown(result)}
    )
    # Not _emit: the scan's strings are made printable as they are read (fleet/labels.py), and a
    # pass over 10,000 nodes to do it again would cost more than the scan's classification.
    if output_format is OutputFormat.json:
        print(result.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        print(fleet_scan_markdown(result), end="")
    else:
        _console().print(fleet_scan_renderable(result))
    _say_saved(output_format, written)


@fleet_app.command("run")
def fleet_run_command(
    kind: Annotated[str, typer.Argument(metavar="preflight|collect", help="What to run.")],
    arguments: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[-- ARGS...]",
            help="The command's own arguments on each host (after --), e.g. -- --image REF.",
        ),
    ] = None,
    inventory: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Without Kubernetes: an Ansible inventory.")
    ] = None,
    limit: Annotated[
        str | None, typer.Option(metavar="PATTERN", help="Ansible host pattern (default: all).")
    ] = None,
    forks: Annotated[int, typer.Option(min=1, help="Hosts Ansible runs at once.")] = 10,
    kube: Annotated[bool, typer.Option("--kube", help="One Job per node on Kubernetes.")] = False,
    kubeconfig: Annotated[Path | None, typer.Option(metavar="FILE")] = None,
    context: Annotated[str | None, typer.Option(help="The kubeconfig's context.")] = None,
    selector: Annotated[
        str | None, typer.Option(metavar="S", help="The nodes, by label selector.")
    ] = None,
    node: Annotated[
        list[str] | None, typer.Option(metavar="NAME", help="A node (repeatable).")
    ] = None,
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", help="Where the Jobs run.")
    ] = "default",
    tool_image: Annotated[
        str | None, typer.Option(metavar="REF", help="The vllm-triage image the Jobs run.")
    ] = None,
    runtime_class: Annotated[
        str, typer.Option(help="RuntimeClass giving nvidia-smi without a GPU ('' for none).")
    ] = "nvidia",
    service_account: Annotated[str | None, typer.Option(help="The Jobs' service account.")] = None,
    keep_jobs: Annotated[bool, typer.Option(help="Leave the Jobs (their TTL is 1 h).")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds the whole run may take.")] = 900.0,
    case: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Case folder: each host's result into its fleet/<UTC>/<host>/, the run into "
            "fleet-<kind>.json. " + _CASE,
        ),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Run preflight or collect on many hosts through Kubernetes Jobs or Ansible; every reachable
    host's result comes back into the case (exit 1 when a host failed or said no-go)."""
    from vllm_triage.case import Case, case_folder
    from vllm_triage.fleet import FleetRunOptions, fleet_run
    from vllm_triage.render.fleet import fleet_run_markdown, fleet_run_renderable

    if kind not in ("preflight", "collect"):
        raise InputError(f"fleet run: choose preflight or collect, not {kind!r}")
    folder = case_folder(case)
    options = FleetRunOptions(
        kind=kind,  # type: ignore[arg-type]
        case=folder,
        arguments=tuple(arguments or ()),
        inventory=inventory,
        limit=limit,
        forks=forks,
        kube=kube,
        kubeconfig=kubeconfig,
        context=context,
        selector=selector,
        nodes=tuple(node or ()),
        namespace=namespace,
        tool_image=tool_image,
        runtime_class=runtime_class or None,
        service_account=service_account,
        keep_jobs=keep_jobs,
        timeout=timeout,
    )
    with _console(stderr=True).status(f"fleet run {kind}"):
        result = fleet_run(options)
    written = Case(folder).save_artifact(
        f"fleet-{kind}", result, {".md": fleet_run_markdown(result)}
    )
    _emit(result, output_format, fleet_run_markdown, fleet_run_renderable)
    _say_saved(output_format, written)
    if any(host.state != "ok" or host.go is False for host in result.hosts):
        raise typer.Exit(EXIT_NO_GO)


@knowledge_app.command("check")
def knowledge_check() -> None:
    """Validate every knowledge file, every example, and every tie between the data and the code."""
    from vllm_triage.knowledge import load_knowledge
    from vllm_triage.ties import check_knowledge

    kb = load_knowledge(cached=False)
    problems = check_knowledge(kb)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in the knowledge base", file=sys.stderr)
        raise typer.Exit(EXIT_NO_GO)
    print(
        f"ok: {len(kb.files)} files, {len(kb.toolkits)} CUDA releases, {len(kb.branches)} branches, "
        f"{len(kb.gpus)} GPUs, {len(kb.recipes)} recipe(s), {len(kb.signatures)} signatures "
        f"({sum(len(s.examples.positive) + len(s.examples.negative) for s in kb.signatures)} "
        f"examples checked), {len(kb.fact_checks)} fact checks, "
        f"{len(kb.prefix.shapes)} prefix shapes, "
        f"{len(kb.redaction.rules)} redaction rules "
        f"({sum(len(r.examples.positive) + len(r.examples.negative) for r in kb.redaction.rules)} "
        "examples checked)"
    )


@knowledge_app.command("show")
def knowledge_show(
    topic: Annotated[
        str | None,
        typer.Argument(
            help="cuda, families, branches, gpus, forward-compat, images, phases, "
            "recipes, signatures, fact-checks, metrics, redaction; a recipe id; or a signature "
            "id/name."
        ),
    ] = None,
) -> None:
    """Print the knowledge base (or one topic of it) with sources and certainty."""
    from vllm_triage.knowledge import load_knowledge
    from vllm_triage.render.knowledge import knowledge_renderable

    _console().print(knowledge_renderable(load_knowledge(), topic))


@knowledge_app.command("patterns")
def knowledge_patterns() -> None:
    """Print every log pattern, one per line, for `grep -E -f` (benchmarks, ad-hoc searches)."""
    from vllm_triage.knowledge import grep_patterns, load_knowledge

    print("\n".join(grep_patterns(load_knowledge())))


def main() -> None:
    """Console-script entry point (the root command exits with the documented code)."""
    # A start allocates a few hundred thousand objects that live as long as the process (typer,
    # pydantic, rich, the knowledge base): collect cyclic garbage less often while they load,
    # and do not walk them all once more at exit (gc.freeze: the exit's collection skips them).
    # Together about a sixth of a small command's time.
    gc.set_threshold(100_000, 50, 100)
    atexit.register(gc.freeze)
    app()
