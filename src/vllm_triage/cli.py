"""The command line: parse, call one library function, render. Each command imports what it
needs when it runs, so `--help` and the small commands start fast. Exit codes are a contract and
live in vllm_triage.errors (0 ok, 1 no-go, 2 bad input, 3 broken knowledge, 70 a bug, 130
interrupted); every error a user sees is one line on stderr, whichever way the command ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

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

    from vllm_triage.validate import ValidateResult

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


app = typer.Typer(
    name="vllm-triage",
    help="Triage vLLM bring-up failures: driver thresholds, log diagnosis, recovery.",
    cls=_OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
knowledge_app = typer.Typer(help="Inspect and validate the knowledge base.", no_args_is_help=True)
app.add_typer(knowledge_app, name="knowledge")


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _emit(
    artifact: BaseModel,
    output_format: OutputFormat,
    markdown: Callable[[Any], str],
    renderable: Callable[[Any], RenderableType],
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


def _console(stderr: bool = False) -> Console:
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
        typer.Option(help="Image reference, resolved by tag, e.g. vllm/vllm-openai:kimi-k3."),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Can a CUDA build run on this driver? compatible / conditional / forward_compat_only / incompatible."""
    from vllm_triage.diagnose import compat as compat_verdict
    from vllm_triage.render.markdown import compat_markdown
    from vllm_triage.render.text import compat_renderable

    verdict = compat_verdict(driver, cuda, gpu, image_config, image)
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
    case: Annotated[Path, typer.Option(help="Case folder the bundle is written into.")] = Path(
        "triage"
    ),
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
    )
    with _console().status(f"collecting (each probe at most {timeout:g} s)"):
        result = collect_bundle(options, case)
    if output_format is OutputFormat.json:
        print(result.manifest.model_dump_json(indent=2))
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
        str | None, typer.Option(help="Image reference, for the image's CUDA.")
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(help="A collect bundle (folder, .tar.gz, or the case folder) to read."),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """What went wrong, in which phase, with the log lines that prove it, and what not to do."""
    from vllm_triage.diagnose import diagnose as diagnose_logs
    from vllm_triage.render.markdown import diagnosis_markdown
    from vllm_triage.render.text import diagnosis_renderable

    result = diagnose_logs(logs or [], driver, image_cuda, gpu, recipe, image_config, image, bundle)
    _emit(result, output_format, diagnosis_markdown, diagnosis_renderable)


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
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Why a sample of requests would not share the prefix cache, and the share they could."""
    from vllm_triage.prefix import prefix_check as prefix_check_requests
    from vllm_triage.render.markdown import prefix_markdown
    from vllm_triage.render.prefix_check import prefix_renderable

    if requests == "-" and launch_cmd == "-":
        raise InputError("REQUESTS and --launch-cmd cannot both read standard input")
    report = prefix_check_requests(
        requests,
        _read_text_argument(launch_cmd, "--launch-cmd"),
        tokenizer,
        trust_remote_code=trust_remote_code,
    )
    _emit(report, output_format, prefix_markdown, prefix_renderable)


@app.command()
def validate(
    url: Annotated[str, typer.Argument(help="The server, e.g. http://127.0.0.1:8000.")],
    model: Annotated[str | None, typer.Option(help="Model id (default: the first served).")] = None,
    target_context: Annotated[
        int | None, typer.Option(help="Prompt tokens for rung 3 (default: max_model_len - output).")
    ] = None,
    max_concurrency: Annotated[int, typer.Option(help="Highest level of the ramp.")] = 8,
    recipe: Annotated[str | None, typer.Option(help="Model recipe, e.g. kimi-k3.")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable that holds the API key.")
    ] = None,
    case: Annotated[Path, typer.Option(help="Case folder for records and summary.")] = Path(
        "triage"
    ),
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
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """Prove a running server works, rung by rung; exit 0 all passed, 1 a rung failed, 2 bad
    input or unreachable server."""
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
        api_key_env=api_key_env,
        case=case,
        keep_going=keep_going,
        launch_cmd=_read_text_argument(launch_cmd, "--launch-cmd"),
        multi_node=multi_node,
        logs=tuple(log or ()),
        transport=transport,
        nccl_test=nccl_test,
        deadlines=parse_deadlines(deadline or ()),
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

    try:
        result = run_validate(options, progress=progress)
    except ValidationInterrupted as stop:
        running.stop()
        _print_validation(stop.result, output_format)
        raise KeyboardInterrupt from None
    _print_validation(result, output_format)
    if result.unreachable:
        raise typer.Exit(EXIT_BAD_INPUT)
    if not result.run.passed:
        raise typer.Exit(EXIT_NO_GO)


def _print_validation(result: ValidateResult, output_format: OutputFormat) -> None:
    from vllm_triage.render.validate import validate_renderable

    if output_format is OutputFormat.json:
        print(result.run.model_dump_json(indent=2))
    else:
        _console().print(validate_renderable(result))


@knowledge_app.command("check")
def knowledge_check() -> None:
    """Validate every knowledge file, and every signature against its examples."""
    from vllm_triage.knowledge import load_knowledge
    from vllm_triage.ties import check_knowledge

    kb = load_knowledge()
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
    app()
