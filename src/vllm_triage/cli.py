"""The command line: parse, call one library function, render. Exit codes are part of the contract.

Exit codes: 0 success (compat: compatible or conditional); 1 compat says it cannot run as the host
stands (forward_compat_only, incompatible), or `knowledge check` found problems; 2 bad input;
3 the knowledge base itself is broken; 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console, RenderableType

from vllm_triage import __version__
from vllm_triage.diagnose import compat as compat_verdict
from vllm_triage.diagnose import diagnose as diagnose_logs
from vllm_triage.errors import InputError
from vllm_triage.knowledge import (
    KnowledgeError,
    check_knowledge,
    grep_patterns,
    load_knowledge,
)
from vllm_triage.render.knowledge import knowledge_renderable
from vllm_triage.render.markdown import compat_markdown, diagnosis_markdown
from vllm_triage.render.text import compat_renderable, diagnosis_renderable

EXIT_OK, EXIT_CANNOT_RUN, EXIT_BAD_INPUT, EXIT_BROKEN_KNOWLEDGE = 0, 1, 2, 3

app = typer.Typer(
    name="vllm-triage",
    help="Triage vLLM bring-up failures: driver thresholds, log diagnosis, recovery.",
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
    """Print an artifact as JSON (for scripts), markdown (for tickets) or rich text (for people)."""
    if output_format is OutputFormat.json:
        print(artifact.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        print(markdown(artifact), end="")
    else:
        _console().print(renderable(artifact))


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False)


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
    verdict = compat_verdict(driver, cuda, gpu, image_config, image)
    _emit(verdict, output_format, compat_markdown, compat_renderable)
    if verdict.verdict in ("forward_compat_only", "incompatible"):
        raise typer.Exit(EXIT_CANNOT_RUN)


@app.command()
def diagnose(
    logs: Annotated[list[str], typer.Argument(help="Log files of the failed start; - for stdin.")],
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
    output_format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.text,
) -> None:
    """What went wrong, in which phase, with the log lines that prove it, and what not to do."""
    result = diagnose_logs(logs, driver, image_cuda, gpu, recipe, image_config, image)
    _emit(result, output_format, diagnosis_markdown, diagnosis_renderable)


@knowledge_app.command("check")
def knowledge_check() -> None:
    """Validate every knowledge file, and every signature against its examples."""
    kb = load_knowledge()
    problems = check_knowledge(kb)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in the knowledge base", file=sys.stderr)
        raise typer.Exit(EXIT_CANNOT_RUN)
    print(
        f"ok: {len(kb.files)} files, {len(kb.toolkits)} CUDA releases, {len(kb.branches)} branches, "
        f"{len(kb.gpus)} GPUs, {len(kb.recipes)} recipe(s), {len(kb.signatures)} signatures "
        f"({sum(len(s.examples.positive) + len(s.examples.negative) for s in kb.signatures)} "
        "examples checked)"
    )


@knowledge_app.command("show")
def knowledge_show(
    topic: Annotated[
        str | None,
        typer.Argument(
            help="cuda, families, branches, gpus, forward-compat, images, phases, "
            "recipes, signatures; a recipe id; or a signature id/name."
        ),
    ] = None,
) -> None:
    """Print the knowledge base (or one topic of it) with sources and certainty."""
    _console().print(knowledge_renderable(load_knowledge(), topic))


@knowledge_app.command("patterns")
def knowledge_patterns() -> None:
    """Print every log pattern, one per line, for `grep -E -f` (benchmarks, ad-hoc searches)."""
    print("\n".join(grep_patterns(load_knowledge())))


def main() -> None:
    """Console-script entry point: one-line errors, documented exit codes, never a traceback."""
    try:
        code = app(standalone_mode=False)
    except InputError as exc:
        _print_error(str(exc), EXIT_BAD_INPUT)
    except KnowledgeError as exc:
        _print_error(f"knowledge base: {exc}", EXIT_BROKEN_KNOWLEDGE)
    except (KeyboardInterrupt, typer.Abort):
        _print_error("interrupted", 130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(EXIT_OK)
    except typer.TyperException as exc:  # usage errors: unknown option, missing argument
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        _print_error(f"{message} (see --help)", getattr(exc, "exit_code", EXIT_BAD_INPUT))
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _print_error(message: str, code: int) -> NoReturn:
    print(f"vllm-triage: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
