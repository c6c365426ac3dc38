"""The command line: parse, call one library function, render. Each command imports what it
needs when it runs, so `--help` and the small commands start fast. Exit codes are a contract and
live in vllm_triage.errors (0 ok, 1 no-go, 2 bad input, 3 broken knowledge, 70 a bug, 130
interrupted); every error a user sees is one line on stderr, whichever way the command ends.

Plain click: it parses and converts the arguments itself, so a start loads no pydantic for the
command line (a command loads it only when its library does) and `--help` loads click alone.
Options that several commands share (--case, --format, --lang, the image's registry and
platform) are defined once, below, as decorators.
"""

from __future__ import annotations

import atexit
import gc
import math
import os
import sys

# Pydantic looks for plugins in every installed distribution's entry points the first time it
# builds a schema (a fifth of a second on a full environment); the tool uses none. Before any
# pydantic import, and only if unset.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from vllm_triage import __version__
from vllm_triage.errors import (
    EXIT_BAD_INPUT,
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NO_GO,
    EXIT_OK,
    InputError,
    TriageError,
    file_system_error,
)
from vllm_triage.validate.deadlines import DEFAULT_DEADLINES

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console, RenderableType

    from vllm_triage.i18n import Language
    from vllm_triage.models import CompatVerdict, Diagnosis
    from vllm_triage.validate import ValidateResult

Model = TypeVar("Model", bound="BaseModel")
_F = TypeVar("_F", bound=Callable[..., Any])

TRACEBACK_ENV = "VLLM_TRIAGE_TRACEBACK"
# A launch command is a few KiB; Linux caps a whole command line (and environment) at 2 MiB.
MAX_TEXT_ARGUMENT_BYTES = 2 * 1024**2


class _ReaderLeft(Exception):
    """Standard output's reader went away (`vllm-triage ... | head`): not an OSError, so that
    click's own handling of a closed pipe (exit 1) does not take it."""


class _Interrupted(Exception):
    """Ctrl-C during a command, carried past click's own handling of KeyboardInterrupt."""


class _Argument(click.Argument):
    """A positional argument with a help text, which _Command lists under Arguments (click
    before 8.5 takes no help for an argument; kept apart from 8.5's own so that --help reads
    the same on every click)."""

    def __init__(self, param_decls: Sequence[str], text: str, **attrs: Any) -> None:
        super().__init__(param_decls, **attrs)
        self.text = text


class _Command(click.Command):
    """A command whose --help lists its arguments, with their help, above its options."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (param.make_metavar(ctx), param.text)
            for param in self.get_params(ctx)
            if isinstance(param, _Argument)
        ]
        if rows:
            with formatter.section("Arguments"):
                formatter.write_dl(rows)
        super().format_options(ctx, formatter)


class _Group(click.Group):
    """A group of _Commands, listed in --help in the order they are defined (not sorted)."""

    command_class = _Command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


class _OneLineErrors(_Group):
    """The root command: every way a command can fail ends in one line and a documented code,
    the same under the console script and under click's CliRunner (tests run it in-process)."""

    def main(
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
        except (KeyboardInterrupt, click.Abort, _Interrupted):
            if _is_terminal(sys.stderr):  # after the terminal's ^C, on a line of its own
                print(file=sys.stderr)
            _fail("interrupted", EXIT_INTERRUPTED)
        except _ReaderLeft:  # the reader left: nothing is wrong, and nothing more to flush
            _quiet_stdout()
            sys.exit(EXIT_OK)
        except click.exceptions.NoArgsIsHelpError as exc:  # a bare command: its help, whole
            print(exc.format_message(), file=sys.stderr)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:  # usage: unknown option, missing argument
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

    # Help and the commands write while these run; click would turn a closed pipe into exit 1.
    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError as exc:
            raise _ReaderLeft from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _ReaderLeft from exc
        except KeyboardInterrupt as exc:  # past click, which would print an empty line first
            raise _Interrupted from exc
        except OSError as exc:  # a full, read-only or forbidden file system: the user's to mend
            refused = file_system_error(exc, _where(exc, ctx))
            if refused is None:
                raise
            raise refused from exc


def _where(exc: OSError, ctx: click.Context) -> str | None:
    """The path an OSError is about: its own file name, else the case folder the command writes
    (a write to an open file names none)."""
    from vllm_triage.inputs import display_name

    if isinstance(exc.filename, str | bytes):
        return display_name(os.fsdecode(exc.filename))
    if _CASE_META not in ctx.meta:
        return None
    from vllm_triage.case import case_folder

    return display_name(case_folder(ctx.meta[_CASE_META]))


def _fail(message: str, code: int) -> NoReturn:
    print(f"vllm-triage: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no such stream, or closed
        return False


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the flush at exit has nowhere to fail."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # no file descriptor (in-process tests)
        pass


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        print(f"vllm-triage {__version__}")
        ctx.exit()


# Every option shows its default in --help (show_default, which each command inherits).
@click.group(
    name="vllm-triage",
    cls=_OneLineErrors,
    help="Triage vLLM bring-up failures: driver thresholds, log diagnosis, recovery.",
    no_args_is_help=True,
    context_settings={"show_default": True},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Print the version.",
)
def app() -> None:
    """vllm-triage: freeze the evidence, find the cause, plan the recovery."""


# The groups are added to the root after its commands (see the end), so --help lists them last.
knowledge_app = _Group(
    "knowledge", help="Inspect and validate the knowledge base.", no_args_is_help=True
)
case_app = _Group(
    "case", help="The case folder: what it holds, the next step.", no_args_is_help=True
)
baseline_app = _Group(
    "baseline", help="A node's state before a change, compared after it.", no_args_is_help=True
)
fleet_app = _Group(
    "fleet",
    help="Which GPU nodes can run an image, in which waves to change the rest; the tool across "
    "many hosts.",
    no_args_is_help=True,
)


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


# Paths are taken as given: each library says what is wrong with one, in its own words.
_PATH = click.Path(path_type=Path, readable=False)


class _FiniteFloat(click.FloatRange):
    """Every float option: a finite number within [min, max] (or above min with min_open),
    else click's usage error (one line, exit 2). FloatRange alone lets nan through (it compares
    false with every bound), and a timeout of nan ends every wait at once."""

    def __init__(self, min: float, max: float, min_open: bool = False) -> None:
        super().__init__(min=min, max=max, min_open=min_open)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


# The most each kind of float option takes: beyond it a value is a slip, not a setting (a probe
# that has not answered in an hour never will; a wait of a day is no deadline).
_PROBE_SECONDS = _FiniteFloat(0, 3600, min_open=True)
_RUN_SECONDS = _FiniteFloat(0, 86400, min_open=True)
_REQUEST_SECONDS = _FiniteFloat(0, 600, min_open=True)
_HOURS = _FiniteFloat(0, 24 * 366)
_STALE_HOURS = _FiniteFloat(0, 24 * 366, min_open=True)
_GPU_GIB = _FiniteFloat(0, 4096, min_open=True)
_UTILIZATION = _FiniteFloat(0.01, 1.0)
# The range of each kind of integer option: the library's own where it checks one (a test ties
# the two), else what no setting needs to pass. Beyond it a value is a slip, and a huge one must
# not reach the library (a prompt of 10**30 tokens, an API page of 10**30 nodes).
_BYTES = click.IntRange(1, 2**60)  # weights or a KV cache: 1 EiB (capacity)
_GPUS = click.IntRange(1, 100_000)  # GPUs given (capacity, preflight: MAX_GPU_COUNT)
_PARALLEL = click.IntRange(1, 4096)  # one parallel size (capacity: MAX_PARALLEL)
_MODEL_LEN = click.IntRange(1, 2**40)  # tokens of --max-model-len (capacity)
_REQUESTS = click.IntRange(1, 1_000_000)  # requests in the estimate (capacity: MAX_CONCURRENCY)
_PROMPT_TOKENS = click.IntRange(16, 2**24)  # the prompt validate builds (MAX_TARGET_CONTEXT)
_IN_FLIGHT = click.IntRange(1, 1024)  # requests at once, a thread each (validate)
_STARTS = click.IntRange(1, 20)  # server starts (validate: MAX_STARTS)
_REVIEW_DAYS = click.IntRange(0, 3650)  # ten years (record: MAX_REVIEW_DAYS)
_NODES = click.IntRange(1, 1_000_000)  # nodes a wave, objects a page: the scan's MAX_NODES
_FORKS = click.IntRange(1, 1000)  # processes Ansible runs at once, each a host's connection
# Where the commands that make an artifact write it (vllm_triage.case.case_folder decides).
_CASE = "Default: $VLLM_TRIAGE_CASE, else ./triage."
_LANG_HELP = "Language of the output: en, ko or ja (default: $VLLM_TRIAGE_LANG, else the locale)."


def _argument(*decls: str, help: str, **attrs: Any) -> Callable[[_F], _F]:
    """A positional argument shown with its help under Arguments in --help."""
    return click.argument(*decls, cls=_Argument, text=help, **attrs)


def _case_option(help: str) -> Callable[[_F], _F]:
    """--case DIR: the case folder, with what the command reads from or writes into it (kept
    where the root's error handler finds it, to name the case in a file system's refusal)."""
    return click.option(
        "--case", type=_PATH, metavar="DIR", help=f"{help} {_CASE}", callback=_remember_case
    )


_CASE_META = "vllm_triage.case"


def _remember_case(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    ctx.find_root().meta[_CASE_META] = value
    return value


def _to_format(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> OutputFormat | None:
    return None if value is None else OutputFormat(value)


def _format_option(default: OutputFormat | None = OutputFormat.text) -> Callable[[_F], _F]:
    """--format text|json|markdown, passed on as an OutputFormat."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice([member.value for member in OutputFormat]),
        default=None if default is None else default.value,
        callback=_to_format,
    )


def _lang_option(help: str = _LANG_HELP) -> Callable[[_F], _F]:
    """--lang: the language of the text and markdown output."""
    return click.option("--lang", help=help)


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
    """The console the commands print with: its texts break lines as prose (render/wrap.py), so
    Japanese wraps between characters and never before 。 or inside an ASCII token."""
    from vllm_triage.render.wrap import ProseConsole

    return ProseConsole(stderr=stderr, highlight=False, soft_wrap=False)


# --image on any command: the config from the local engine or the registry (vllm_triage.image).
_registry_auth_option = click.option(
    "--registry-auth",
    type=_PATH,
    metavar="FILE",
    help="Docker config.json whose auths hold credentials for a private registry "
    "(read, never written or printed).",
)
_registry_auth_realm_option = click.option(
    "--registry-auth-realm",
    "registry_auth_realms",
    multiple=True,
    metavar="HOST",
    help="A token service (host or host:port) trusted with the --registry-auth credentials "
    "besides the registry's own host and its known ones (repeatable).",
)
_platform_option = click.option(
    "--platform",
    metavar="OS/ARCH",
    help="Platform to pick from a multi-arch image, e.g. linux/arm64 (default: this host's).",
)


@contextmanager
def _image_inputs(
    image: str | None,
    image_config: Path | None,
    registry_auth: Path | None,
    platform: str | None,
    realms: tuple[str, ...] = (),
) -> Iterator[tuple[Path | None, str | None]]:
    """The (image config file, image reference) a command passes on: --image resolved once
    (vllm_triage.image.image_inputs; the image package is imported only then), with a line on
    stderr saying where its config came from, pinned to its digest, and any warning."""
    if image is None or image_config is not None:
        yield image_config, image
        return
    from vllm_triage.image import ImageRequest, describe, image_inputs

    request = ImageRequest(image, None, registry_auth, platform, registry_auth_realms=realms)
    with image_inputs(request) as found:
        if found.resolved is not None:
            for line in (describe(found.resolved), *found.resolved.warnings):
                print(f"vllm-triage: {' '.join(line.split())}", file=sys.stderr)
        yield found.image_config, found.image


@app.command()
@click.option("--driver", required=True, help="Host NVIDIA driver version, e.g. 575.57.08.")
@click.option("--cuda", help="CUDA of the build, e.g. 13.0 or cu130.")
@click.option("--gpu", help='GPU name as nvidia-smi prints it, e.g. "NVIDIA H100 80GB HBM3".')
@click.option("--image-config", type=_PATH, help="Image config JSON (docker image inspect output).")
@click.option(
    "--image",
    metavar="REF",
    help="Image reference, e.g. vllm/vllm-openai:kimi-k3: its config from the local "
    "engine or the registry (the tag only as a fallback).",
)
@_registry_auth_option
@_registry_auth_realm_option
@_platform_option
@_format_option()
@_lang_option("Language of the text and markdown: en, ko or ja (default: the locale).")
def compat(
    driver: str,
    cuda: str | None,
    gpu: str | None,
    image_config: Path | None,
    image: str | None,
    registry_auth: Path | None,
    registry_auth_realms: tuple[str, ...],
    platform: str | None,
    output_format: OutputFormat,
    lang: str | None,
) -> None:
    """Can a CUDA build run on this driver? compatible / conditional / forward_compat_only / incompatible."""
    from functools import partial

    from vllm_triage.diagnose import CompatOptions
    from vllm_triage.diagnose import compat as compat_verdict
    from vllm_triage.i18n import resolve_language
    from vllm_triage.render.markdown import compat_markdown

    language = resolve_language(lang)
    with _image_inputs(
        None if cuda else image, image_config, registry_auth, platform, registry_auth_realms
    ) as found:
        verdict = compat_verdict(CompatOptions(driver, cuda, gpu, *found))
    _emit(
        verdict,
        output_format,
        partial(compat_markdown, language=language),
        partial(_compat_text, language=language),
    )
    if verdict.verdict in ("forward_compat_only", "incompatible"):
        raise click.exceptions.Exit(EXIT_NO_GO)


@app.command()
@click.option("--container", help="Name or id of the failed container (never restarted).")
@click.option("--pod", help="Name of the failed pod.")
@click.option("--namespace", "-n", default="default", help="The pod's namespace.")
@click.option("--log", type=_PATH, multiple=True, help="A log file to include (repeatable).")
@click.option("--launch-cmd", help="File with the launch command, or - for stdin.")
@click.option("--image", help="Image reference, for its config.")
@click.option("--model-path", help="Model folder (as the container sees it, if any).")
@_case_option("Case folder: the bundle goes into its bundles/.")
@click.option(
    "--timeout",
    type=_PROBE_SECONDS,
    default=10.0,
    help="Seconds the probes may take; the whole run, bundle written, ends within this plus 10 s.",
)
@click.option(
    "--probe-image/--no-probe-image",
    default=False,
    help="Start a throwaway container without GPUs to read torch/vLLM versions.",
)
@click.option(
    "--host-root",
    type=_PATH,
    default=Path("/"),
    help="Where the host's / is mounted (e.g. /host in a node debug pod).",
)
@click.option("--engine", help="Container engine: docker or podman (default: found).")
@click.option(
    "--show-commands/--no-show-commands",
    default=False,
    help="Print the allow-list of commands collect may run, and exit.",
)
@_format_option()
def collect(
    container: str | None,
    pod: str | None,
    namespace: str,
    log: tuple[Path, ...],
    launch_cmd: str | None,
    image: str | None,
    model_path: str | None,
    case: Path | None,
    timeout: float,
    probe_image: bool,
    host_root: Path,
    engine: str | None,
    show_commands: bool,
    output_format: OutputFormat,
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
        logs=log,
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
@_argument("logs", nargs=-1, help="Log files of the failed start; - for stdin.")
@click.option("--driver", help="Host NVIDIA driver version.")
@click.option("--image-cuda", help="CUDA of the image, e.g. 13.0.")
@click.option("--gpu", help="GPU name as nvidia-smi prints it.")
@click.option("--recipe", help="Model recipe, e.g. kimi-k3.")
@click.option("--image-config", type=_PATH, help="Image config JSON, for the image's CUDA.")
@click.option(
    "--image",
    metavar="REF",
    help="Image reference, for the image's CUDA: its config from the local engine or "
    "the registry (the tag only as a fallback).",
)
@_registry_auth_option
@_registry_auth_realm_option
@_platform_option
@click.option(
    "--bundle",
    type=_PATH,
    help="A collect bundle (folder, .tar.gz, or a case folder) to read.",
)
@_case_option(
    "Case folder: the diagnosis goes into its diagnosis.json and .md (an earlier one "
    "into history/); with no logs and no --bundle, its newest bundle is read."
)
@_format_option()
@click.option(
    "--explain",
    is_flag=True,
    help="Also print the decision: every rule that matched, its tier and phase, and why "
    "the primary cause won over each other candidate (JSON always carries it).",
)
@_lang_option("Language of the text and markdown: en, ko or ja (default: the locale).")
def diagnose(
    logs: tuple[str, ...],
    driver: str | None,
    image_cuda: str | None,
    gpu: str | None,
    recipe: str | None,
    image_config: Path | None,
    image: str | None,
    registry_auth: Path | None,
    registry_auth_realms: tuple[str, ...],
    platform: str | None,
    bundle: Path | None,
    case: Path | None,
    output_format: OutputFormat,
    explain: bool,
    lang: str | None,
) -> None:
    """What went wrong, in which phase, with the log lines that prove it, and what not to do."""
    from functools import partial

    from vllm_triage.inputs import hash_ahead

    hash_ahead(logs)  # before the library loads: a large log is hashed on another core meanwhile
    from vllm_triage.case import Case, case_folder
    from vllm_triage.diagnose import DiagnoseOptions
    from vllm_triage.diagnose import diagnose as diagnose_logs
    from vllm_triage.i18n import resolve_language
    from vllm_triage.render.markdown import diagnosis_markdown

    language = resolve_language(lang)
    folder = case_folder(case)
    chosen = None if image_cuda else image
    inputs = _image_inputs(chosen, image_config, registry_auth, platform, registry_auth_realms)
    with inputs as (config, reference):
        options = DiagnoseOptions(
            logs, driver, image_cuda, gpu, recipe, config, reference, bundle, folder
        )
        result = _for_the_case(diagnose_logs(options))
    written = Case(folder).save_diagnosis(result, diagnosis_markdown(result, language=language))
    _emit(
        result,
        output_format,
        partial(diagnosis_markdown, explain=explain, language=language),
        partial(_diagnosis_text, explain=explain, language=language),
    )
    _say_saved(output_format, written)


def _compat_text(verdict: CompatVerdict, language: Language) -> RenderableType:
    """The terminal rendering, imported only for text output (rich is not needed for JSON)."""
    from vllm_triage.render.diagnosis import Words
    from vllm_triage.render.text import compat_renderable

    return compat_renderable(verdict, Words(language))


def _diagnosis_text(diagnosis: Diagnosis, explain: bool, language: Language) -> RenderableType:
    """The terminal rendering, imported only for text output (rich is not needed for JSON)."""
    from vllm_triage.render.text import diagnosis_renderable

    return diagnosis_renderable(diagnosis, explain=explain, language=language)


def _for_the_case(artifact: Model) -> Model:
    """An artifact as the case keeps it (and the command prints it): redacted, as everything the
    tool writes is, and printable (no lone surrogates)."""
    from vllm_triage.redact import Redactor
    from vllm_triage.render.printable import printable

    return Redactor().model(printable(artifact, terminal=False))


def _keep_and_print(
    folder: Path,
    stem: str,
    artifact: BaseModel,
    output_format: OutputFormat,
    markdown: Callable[[Any], str],
    renderable: Callable[[Any], RenderableType],
) -> None:
    """Write the artifact and its markdown into the case (<stem>.json and .md), print it in the
    format asked for, then say where it went."""
    from vllm_triage.case import Case

    written = Case(folder).save_artifact(stem, artifact, {".md": markdown(artifact)})
    _emit(artifact, output_format, markdown, renderable)
    _say_saved(output_format, written)


def _say_saved(output_format: OutputFormat, paths: Sequence[Path]) -> None:
    """Where the artifact went, under the text output (JSON and markdown stay pure)."""
    if output_format is OutputFormat.text:
        from rich.text import Text

        from vllm_triage.inputs import display_name

        _console().print(Text(f"case     {', '.join(display_name(p) for p in paths)}"))


@app.command("prefix-check")
@_argument(
    "requests",
    metavar="REQUESTS.jsonl",
    help="OpenAI chat request bodies, one a line; - for stdin.",
)
@click.option(
    "--launch-cmd",
    metavar="FILE|-",
    help="The launch command, to check prefix caching is on.",
)
@click.option(
    "--tokenizer",
    metavar="PATH",
    help="Local tokenizer folder: tokens with the model's chat template.",
)
@click.option(
    "--trust-remote-code/--no-trust-remote-code",
    default=False,
    help="Let the tokenizer folder run its own code (e.g. Kimi's).",
)
@_case_option("Case folder: the report goes into its prefix-check/.")
@_format_option()
def prefix_check(
    requests: str,
    launch_cmd: str | None,
    tokenizer: str | None,
    trust_remote_code: bool,
    case: Path | None,
    output_format: OutputFormat,
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
@click.option("--model", required=True, metavar="PATH", help="Model folder, or its config.json.")
@click.option(
    "--weights-bytes",
    type=_BYTES,
    metavar="N",
    help="The weights' total bytes (default: model.safetensors.index.json, the "
    "*.safetensors files, or the config's parameter count).",
)
@click.option("--gpu", metavar="NAME", help='GPU model, e.g. B200, "H100 80GB", "NVIDIA H100 NVL".')
@click.option(
    "--gpu-count", type=_GPUS, metavar="N", help="GPUs there are (default: what the launch uses)."
)
@click.option(
    "--gpu-memory-gib",
    type=_GPU_GIB,
    metavar="GIB",
    help="One GPU's memory, for a GPU not in the table.",
)
@click.option(
    "--bundle",
    type=_PATH,
    help="A collect bundle (or case folder): its GPUs, launch and model size.",
)
@click.option(
    "--launch-cmd",
    metavar="FILE|-",
    help="The vLLM launch command; the flags below override it.",
)
@click.option("--tensor-parallel-size", "-tp", type=_PARALLEL, metavar="N")
@click.option("--pipeline-parallel-size", "-pp", type=_PARALLEL, metavar="N")
@click.option("--data-parallel-size", "-dp", type=_PARALLEL, metavar="N")
@click.option("--decode-context-parallel-size", "-dcp", type=_PARALLEL, metavar="N")
@click.option("--enable-expert-parallel/--no-enable-expert-parallel", default=None)
@click.option(
    "--max-model-len", type=_MODEL_LEN, metavar="N", help="Default: the model's own maximum."
)
@click.option(
    "--gpu-memory-utilization", type=_UTILIZATION, metavar="F", help="Default: 0.9, as vLLM."
)
@click.option("--kv-cache-dtype", metavar="D", help="auto (the model's dtype), fp8, ...")
@click.option("--quantization", metavar="METHOD", help="Online quantisation, e.g. fp8.")
@click.option("--dtype", metavar="D", help="Default: auto.")
@click.option(
    "--kv-cache-memory-bytes",
    type=_BYTES,
    metavar="N",
    help="The KV cache per GPU, given outright.",
)
@click.option(
    "--concurrency",
    type=_REQUESTS,
    default=1,
    metavar="N",
    help="Requests of --max-model-len at once.",
)
@_format_option()
def capacity_command(
    model: str,
    weights_bytes: int | None,
    gpu: str | None,
    gpu_count: int | None,
    gpu_memory_gib: float | None,
    bundle: Path | None,
    launch_cmd: str | None,
    tensor_parallel_size: int | None,
    pipeline_parallel_size: int | None,
    data_parallel_size: int | None,
    decode_context_parallel_size: int | None,
    enable_expert_parallel: bool | None,
    max_model_len: int | None,
    gpu_memory_utilization: float | None,
    kv_cache_dtype: str | None,
    quantization: str | None,
    dtype: str | None,
    kv_cache_memory_bytes: int | None,
    concurrency: int,
    output_format: OutputFormat,
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
        raise click.exceptions.Exit(EXIT_NO_GO)


@app.command("preflight")
@click.option("--image", metavar="REF", help="The image the server will run.")
@click.option(
    "--image-config",
    type=_PATH,
    metavar="FILE",
    help="The image's config (docker image inspect, or OCI).",
)
@click.option(
    "--registry-auth",
    type=_PATH,
    metavar="FILE",
    help="A docker config.json for a private registry.",
)
@_registry_auth_realm_option
@click.option("--recipe", help="Model recipe, e.g. kimi-k3 (default: the launch's model's).")
@click.option("--profile", help="The recipe's serving profile (default: its default).")
@click.option("--launch-cmd", metavar="FILE|-", help="The vLLM launch command.")
@click.option(
    "--model-path", type=_PATH, metavar="PATH", help="The model folder, as this node sees it."
)
@click.option(
    "--container-user",
    metavar="UID[:GID]",
    help="The server's user (default: the launch's --user, the image's User, root).",
)
@click.option("--driver", help="Host driver version (default: nvidia-smi).")
@click.option("--gpu", help="GPU name (default: nvidia-smi).")
@click.option(
    "--gpu-count", type=_GPUS, metavar="N", help="GPUs on the node (default: nvidia-smi)."
)
@click.option(
    "--shm-size",
    metavar="SIZE",
    help="The container's /dev/shm, e.g. 16g (default: statvfs).",
)
@click.option("--transport", help="rdma or nvlink, for the all-to-all backend (default: detected).")
@click.option(
    "--host-root",
    type=_PATH,
    default=Path("/"),
    help="Where the host's / is mounted (for /dev, /etc/cdi, /sys).",
)
@click.option(
    "--timeout", type=_PROBE_SECONDS, default=15.0, help="Seconds each host command may take."
)
@_format_option()
def preflight_command(
    image: str | None,
    image_config: Path | None,
    registry_auth: Path | None,
    registry_auth_realms: tuple[str, ...],
    recipe: str | None,
    profile: str | None,
    launch_cmd: str | None,
    model_path: Path | None,
    container_user: str | None,
    driver: str | None,
    gpu: str | None,
    gpu_count: int | None,
    shm_size: str | None,
    transport: str | None,
    host_root: Path,
    timeout: float,
    output_format: OutputFormat,
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
    from vllm_triage.image.realms import trusted_realms

    with trusted_realms(registry_auth_realms):
        checked = preflight(options)
    result = printable(checked, terminal=output_format is not OutputFormat.json)
    if output_format is OutputFormat.json:
        print(result.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        print(preflight_markdown(result), end="")
    else:
        print(preflight_text(result), end="")
    if not result.go:
        raise click.exceptions.Exit(EXIT_NO_GO)


@app.command()
@_argument("url", help="The server, e.g. http://127.0.0.1:8000.")
@click.option("--model", help="Model id (default: the first served).")
@click.option(
    "--target-context",
    type=_PROMPT_TOKENS,
    help="Prompt tokens for rung 3 (default: max_model_len - output).",
)
@click.option("--max-concurrency", type=_IN_FLIGHT, default=8, help="Highest level of the ramp.")
@click.option("--recipe", help="Model recipe, e.g. kimi-k3.")
@click.option(
    "--profile", help="The recipe's serving profile, e.g. pd-decode (default: its default)."
)
@click.option("--api-key-env", help="Environment variable that holds the API key.")
@_case_option("Case folder: the run (records and summary) goes into its runs/<UTC>/.")
@click.option(
    "--keep-going/--no-keep-going", default=False, help="Run every rung, even after a failure."
)
@click.option("--launch-cmd", help="File with the launch command (prefix caching, multi-node).")
@click.option("--multi-node/--no-multi-node", default=False, help="Run the multi-node rung.")
@click.option(
    "--log",
    type=_PATH,
    multiple=True,
    help="Server log to check for NCCL errors (multi-node).",
)
@click.option("--transport", help="rdma or nvlink: the all-to-all transport (multi-node).")
@click.option("--nccl-test", help="An NCCL test command to run and parse (multi-node).")
@click.option(
    "--deadline",
    multiple=True,
    metavar="RUNG=SECONDS",
    help="A rung's total deadline (repeatable; RUNG `all` sets every rung). Defaults: "
    + ", ".join(f"{name} {seconds:g}" for name, seconds in DEFAULT_DEADLINES.items())
    + ".",
)
@click.option(
    "--loose-tools/--no-loose-tools",
    default=False,
    help="Send the tools without `strict: true`, as most agents do (default: strict).",
)
@click.option(
    "--start-cmd",
    metavar="FILE",
    help="File with the command that starts the server (run without a shell; NAME=VALUE "
    "words before it set its environment). validate starts the server --starts times, "
    "times each engine initialisation, stops it (SIGTERM, then SIGKILL), diagnoses a "
    "failed start, and runs the ladder on the last start. Use it only on a node you name "
    "as isolated (no service traffic): it starts and stops a server there.",
)
@click.option(
    "--starts",
    type=_STARTS,
    metavar="N",
    help="How many starts with --start-cmd (default 1, at most 20).",
)
@click.option(
    "--start-deadline",
    type=_RUN_SECONDS,
    default=1200.0,
    metavar="SECONDS",
    help="Per start: the most seconds until /health answers.",
)
@click.option(
    "--node",
    metavar="NAME",
    help="The node the server runs on, as the case's baselines name it: the run is tied to the "
    "driver and GPUs of the newest baseline of that node (default: the host that ran "
    "--start-cmd). The record counts a run as evidence for a node only when tied.",
)
@click.option("--image", metavar="REF", help="The image the server runs, for the record.")
@click.option(
    "--compare-endpoint",
    metavar="URL",
    help="A second endpoint (e.g. the isolated environment against the upgraded node): "
    "the same requests replayed against it, the rungs side by side in the summary.",
)
@click.option(
    "--compare-api-key-env",
    help="Environment variable with the second endpoint's API key (its own).",
)
@_format_option()
def validate(
    url: str,
    model: str | None,
    target_context: int | None,
    max_concurrency: int,
    recipe: str | None,
    profile: str | None,
    api_key_env: str | None,
    case: Path | None,
    keep_going: bool,
    launch_cmd: str | None,
    multi_node: bool,
    log: tuple[Path, ...],
    transport: str | None,
    nccl_test: str | None,
    deadline: tuple[str, ...],
    loose_tools: bool,
    start_cmd: str | None,
    starts: int | None,
    start_deadline: float,
    node: str | None,
    image: str | None,
    compare_endpoint: str | None,
    compare_api_key_env: str | None,
    output_format: OutputFormat,
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
        logs=log,
        transport=transport,
        nccl_test=nccl_test,
        deadlines=parse_deadlines(deadline),
        loose_tools=loose_tools,
        start_cmd=_read_text_argument(start_cmd, "--start-cmd"),
        starts=starts,
        start_deadline_s=start_deadline,
        compare_url=compare_endpoint,
        compare_api_key_env=compare_api_key_env,
        node=node,
        image=image,
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
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    comparison = result.run.comparison
    if not result.run.passed or (comparison is not None and not comparison.both_passed):
        raise click.exceptions.Exit(EXIT_NO_GO)


def _print_validation(result: ValidateResult, output_format: OutputFormat) -> None:
    from vllm_triage.render.validate import validate_markdown, validate_renderable

    if output_format is OutputFormat.json:
        print(result.run.model_dump_json(indent=2))
    elif output_format is OutputFormat.markdown:
        from vllm_triage.render.printable import printable

        print(validate_markdown(printable(result, terminal=True)), end="")
    else:
        _console().print(validate_renderable(result))


@case_app.command("show")
@_argument("folder", type=_PATH, required=False, metavar="[DIR]", help="The case folder. " + _CASE)
@_format_option()
@_lang_option()
def case_show(folder: Path | None, output_format: OutputFormat, lang: str | None) -> None:
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
@click.option(
    "--label",
    required=True,
    help="Name of this baseline, e.g. before (letters, digits, . _ -).",
)
@click.option("--container", help="The existing model's container: its image's NCCL and its log.")
@click.option(
    "--log",
    type=_PATH,
    multiple=True,
    help="The existing model's log, for NCCL's version and transport.",
)
@click.option(
    "--endpoint",
    help="A model serving on the node, e.g. http://127.0.0.1:8000: one short request.",
)
@click.option("--model", help="Model id for --endpoint (default: the first served).")
@click.option("--api-key-env", help="Environment variable that holds --endpoint's API key.")
@click.option(
    "--endpoint-timeout",
    type=_REQUEST_SECONDS,
    default=60.0,
    help="Seconds the short request may take, all told.",
)
@_case_option("Case folder: into its baselines/<label>/.")
@click.option("--timeout", type=_PROBE_SECONDS, default=10.0, help="Seconds the probes may take.")
@click.option(
    "--host-root",
    type=_PATH,
    default=Path("/"),
    help="Where the host's / is mounted (e.g. /host in a node debug pod).",
)
@click.option("--engine", help="Container engine: docker or podman (default: found).")
@_format_option()
@_lang_option()
def baseline_capture(
    label: str,
    container: str | None,
    log: tuple[Path, ...],
    endpoint: str | None,
    model: str | None,
    api_key_env: str | None,
    endpoint_timeout: float,
    case: Path | None,
    timeout: float,
    host_root: Path,
    engine: str | None,
    output_format: OutputFormat,
    lang: str | None,
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
        logs=log,
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
@_argument("before", metavar="A", help="Before: a label, or a folder.")
@_argument("after", metavar="B", help="After: a label, or a folder.")
@click.option(
    "--expect-driver",
    help="The driver the change installs: a version, or a branch (r580).",
)
@_case_option(
    "Case folder: labels are its baselines/; the comparison goes into its "
    "baseline-comparison.json and .md."
)
@_format_option()
@_lang_option()
def baseline_compare(
    before: str,
    after: str,
    expect_driver: str | None,
    case: Path | None,
    output_format: OutputFormat,
    lang: str | None,
) -> None:
    """Compare two baselines: the expected change (the driver) apart from regressions; exit 1 on
    a regression, 0 otherwise, 2 on bad input."""
    from vllm_triage.baseline import CompareOptions, replaces_current
    from vllm_triage.baseline import baseline_compare as compare
    from vllm_triage.case import case_folder
    from vllm_triage.i18n import resolve_language
    from vllm_triage.render.baseline import comparison_markdown, comparison_renderable

    language = resolve_language(lang)
    folder = case_folder(case)
    result = _for_the_case(compare(CompareOptions(before, after, folder, expect_driver)))
    if replaces_current(folder, result):
        _keep_and_print(
            folder,
            "baseline-comparison",
            result,
            output_format,
            lambda c: comparison_markdown(c, language),
            lambda c: comparison_renderable(c, language),
        )
    else:
        _keep_in_history(folder, result, output_format, language)
    if result.verdict == "regression":
        raise click.exceptions.Exit(EXIT_NO_GO)


def _keep_in_history(
    folder: Path, result: Any, output_format: OutputFormat, language: Language
) -> None:
    """An exploratory comparison: written to history/ under its pair, printed, and said so."""
    from rich.text import Text

    from vllm_triage.baseline import BaselineComparison
    from vllm_triage.baseline.texts import KEPT_IN_HISTORY
    from vllm_triage.case import Case, read_artifact
    from vllm_triage.i18n import catalog
    from vllm_triage.render.baseline import comparison_markdown, comparison_renderable

    case = Case(folder)
    current = read_artifact(case.root / "baseline-comparison.json", BaselineComparison)
    pair = f"{result.before.label}-{result.after.label}"
    written = case.save_to_history(
        "baseline-comparison", pair, result, {".md": comparison_markdown(result, language)}
    )
    _emit(
        result,
        output_format,
        lambda c: comparison_markdown(c, language),
        lambda c: comparison_renderable(c, language),
    )
    note = catalog(language)(
        KEPT_IN_HISTORY,
        before=result.before.label,
        after=result.after.label,
        current_before=current.before.label,
        current_after=current.after.label,
    )
    _console(stderr=True).print(Text(note))
    _say_saved(output_format, written)


def _interactive() -> bool:
    """Whether a person sits at the command: standard input and output are terminals."""
    return sys.stdin.isatty() and sys.stdout.isatty()


class _PlanPrompt:
    """`plan`'s short prompt on a terminal: the question in the reader's language."""

    def __init__(self, language: Language) -> None:
        from vllm_triage.i18n import catalog

        self.tr = catalog(language)

    def confirm(self, question: str) -> bool:
        return click.confirm(self.tr(question), err=True)

    def hours(self, question: str) -> float | None:
        from vllm_triage.plan.messages import ASK_DEADLINE_AGAIN

        for _ in range(3):
            answer = click.prompt(self.tr(question), default="", show_default=False, err=True)
            if not answer.strip():
                return None
            try:
                return float(_HOURS.convert(answer, None, None))
            except click.BadParameter:
                click.echo(self.tr(ASK_DEADLINE_AGAIN), err=True)
        return None


@app.command()
@click.option(
    "--diagnosis",
    type=_PATH,
    metavar="FILE",
    help="A diagnosis (what `diagnose --format json` writes) instead of the case's.",
)
@click.option(
    "--maintenance-window/--no-maintenance-window",
    default=None,
    show_default=False,
    help="Whether a maintenance window is available for a driver change.",
)
@click.option(
    "--cluster-can-change/--cluster-cannot-change",
    default=None,
    show_default=False,
    help="Whether the shared cluster may change today.",
)
@click.option(
    "--deadline-hours",
    type=_HOURS,
    help="Recovery deadline, in hours from now.",
)
@click.option(
    "--can-maintain-build/--cannot-maintain-build",
    default=None,
    show_default=False,
    help="Whether the team can keep a custom build reproducible (pinned build script, "
    "PyTorch, FlashInfer, vLLM commit, security updates).",
)
@click.option("--gpu", help="GPU name as nvidia-smi prints it (when no bundle says).")
@click.option("--driver", help="Host driver version (when no bundle says).")
@click.option("--nodes", multiple=True, help="Target nodes (repeatable, or comma-separated).")
@click.option(
    "--exclude", multiple=True, help="Nodes to leave out (repeatable, or comma-separated)."
)
@_case_option(
    "Case folder: its diagnosis and newest bundle are read, the plan goes into its "
    "plan.json and .md (an earlier one into history/)."
)
@_format_option()
@_lang_option()
def plan(
    diagnosis: Path | None,
    maintenance_window: bool | None,
    cluster_can_change: bool | None,
    deadline_hours: float | None,
    can_maintain_build: bool | None,
    gpu: str | None,
    driver: str | None,
    nodes: tuple[str, ...],
    exclude: tuple[str, ...],
    case: Path | None,
    output_format: OutputFormat,
    lang: str | None,
) -> None:
    """Choose the recovery path under the team's constraints and write the change plan; a
    constraint not given is asked on a terminal, else planned conservatively."""
    from vllm_triage.case import case_folder
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
        nodes=nodes,
        exclude=exclude,
        ask=_PlanPrompt(language) if _interactive() else None,
    )
    result = _for_the_case(make_plan(options))
    _keep_and_print(
        folder,
        "plan",
        result,
        output_format,
        lambda p: plan_markdown(p, language),
        lambda p: plan_renderable(p, language),
    )


class _RecordPrompt:
    """`record`'s questions on a terminal, in the reader's language."""

    def __init__(self, language: Language) -> None:
        from vllm_triage.i18n import catalog

        self.tr = catalog(language)

    def confirm(self, question: str) -> bool:
        return click.confirm(self.tr(question), err=True)

    def name(self, question: str) -> str:
        return str(click.prompt(self.tr(question), err=True))


# `vllm-triage record [OPTIONS]` makes the record (the group's own callback); `record check` checks it.
@click.group("record", cls=_Group, invoke_without_command=True)
@click.option(
    "--adopted",
    metavar="PATH",
    help="The path the team took: upgrade_driver, custom_build, isolated_env, "
    "forward_compat or no_driver_change (default: the plan's recommendation).",
)
@click.option("--reason", help="The team's own words on why (kept with the plan's).")
@click.option("--review-days", type=_REVIEW_DAYS, help="Days until the re-evaluation (default 30).")
@click.option(
    "--recipe",
    help="The model's recipe, whose image triggers are watched (default: found).",
)
@click.option(
    "--maintenance-acceptable/--maintenance-not-acceptable",
    default=None,
    show_default=False,
    help="Whether the maintenance burden of the new environment's driver and "
    "dependencies is acceptable (with --answered-by).",
)
@click.option(
    "--approval-ready/--approval-not-ready",
    default=None,
    show_default=False,
    help="Whether the rollback package and the change approval are ready (with --answered-by).",
)
@click.option("--answered-by", metavar="NAME", help="Who gave the answers.")
@_case_option(
    "Case folder: its diagnosis, plan, baselines and runs are read, the record goes "
    "into its record.json and .md (an earlier one into history/)."
)
@_format_option()
@_lang_option()
@click.pass_context
def record_app(
    ctx: click.Context,
    adopted: str | None,
    reason: str | None,
    review_days: int | None,
    recipe: str | None,
    maintenance_acceptable: bool | None,
    approval_ready: bool | None,
    answered_by: str | None,
    case: Path | None,
    output_format: OutputFormat,
    lang: str | None,
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
    from vllm_triage.case import case_folder
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
    _keep_and_print(
        folder,
        "record",
        result,
        output_format,
        lambda r: record_markdown(r, language),
        lambda r: record_renderable(r, language),
    )


@record_app.command("check")
@click.option(
    "--registry",
    metavar="URL",
    help="Registry to read the tag lists from, for every image trigger (default: each "
    "trigger's own, e.g. https://registry-1.docker.io).",
)
@click.option(
    "--deadline",
    type=_REQUEST_SECONDS,
    default=20.0,
    help="Seconds each registry may take to answer, all told.",
)
@_case_option("Case folder: its record.json is checked.")
@_format_option(default=None)
@_lang_option()
@click.pass_context
def record_check(
    ctx: click.Context,
    registry: str | None,
    deadline: float,
    case: Path | None,
    output_format: OutputFormat | None,
    lang: str | None,
) -> None:
    """Re-evaluate the record's triggers (the review date, image tags in the registry); exit 1
    when the decision is due for review, 0 when not, 4 when not due among the triggers it could
    check but a trigger could not be checked (an unreachable registry leaves it unknown), 2 on
    bad input."""
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
        raise click.exceptions.Exit(EXIT_NO_GO)
    if result.unchecked:
        raise click.exceptions.Exit(EXIT_INCOMPLETE)


@app.command()
@_case_option(
    "Case folder: read whole; the page goes into its report.html (an earlier one into history/)."
)
@_lang_option()
@click.option(
    "--pdf/--no-pdf",
    default=False,
    help="Also print the page to report.pdf through headless Chromium.",
)
@click.option(
    "--browser",
    type=_PATH,
    metavar="PATH",
    help="The Chromium to print with (default: found on PATH).",
)
@_format_option()
def report(
    case: Path | None,
    lang: str | None,
    pdf: bool,
    browser: Path | None,
    output_format: OutputFormat,
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
@click.option("--image", metavar="REF", help="The image to roll out.")
@click.option(
    "--image-config",
    type=_PATH,
    metavar="FILE",
    help="The image's config (docker image inspect, or OCI).",
)
@click.option("--cuda", metavar="X.Y", help="The image's CUDA, when no config is at hand.")
@click.option(
    "--registry-auth",
    type=_PATH,
    metavar="FILE",
    help="A docker config.json for a private registry.",
)
@_registry_auth_realm_option
@click.option("--platform", help="The image's platform, e.g. linux/arm64 (default: this one's).")
@click.option("--kube", is_flag=True, help="Read the nodes (and their GPU pods) from the cluster.")
@click.option(
    "--kubeconfig", type=_PATH, metavar="FILE", help="Default: $KUBECONFIG, ~/.kube/config."
)
@click.option("--context", help="The kubeconfig's context.")
@click.option("--selector", metavar="S", help="Node label selector, e.g. pool=gpu.")
@click.option("--nodes", type=_PATH, metavar="FILE", help="kubectl get nodes -o json output.")
@click.option(
    "--pods",
    type=_PATH,
    metavar="FILE",
    help="kubectl get pods -A -o json: the GPU work per node.",
)
@click.option(
    "--inventory",
    type=_PATH,
    metavar="FILE",
    help="Without Kubernetes: YAML, CSV or Ansible inventory with host vars.",
)
@click.option(
    "--wave-size",
    type=_NODES,
    default=10,
    help="Nodes per wave after the canary.",
)
@click.option(
    "--stale-after",
    type=_STALE_HOURS,
    default=24.0,
    metavar="HOURS",
    help="Labels older than this are stale.",
)
@click.option("--page-size", type=_NODES, default=500, help="Objects per API request.")
@_case_option("Case folder: the scan goes into its fleet-scan.json and .md.")
@_format_option()
def fleet_scan_command(
    image: str | None,
    image_config: Path | None,
    cuda: str | None,
    registry_auth: Path | None,
    registry_auth_realms: tuple[str, ...],
    platform: str | None,
    kube: bool,
    kubeconfig: Path | None,
    context: str | None,
    selector: str | None,
    nodes: Path | None,
    pods: Path | None,
    inventory: Path | None,
    wave_size: int,
    stale_after: float,
    page_size: int,
    case: Path | None,
    output_format: OutputFormat,
) -> None:
    """For every GPU node: ready, forward_compat, needs_upgrade (to which driver) or unknown, and
    the rollout waves (a canary without GPU work first)."""
    from vllm_triage.case import Case, case_folder
    from vllm_triage.fleet import FleetScanOptions, scan_fleet
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
    from vllm_triage.image.realms import trusted_realms

    with trusted_realms(registry_auth_realms):
        result = scan_fleet(options)
    written = Case(case_folder(case)).save_current(
        "fleet-scan", result.json_chunks(), {".md": fleet_scan_markdown(result)}
    )
    # Not _emit: the scan's strings are made printable as they are read (fleet/labels.py), and a
    # pass over 10,000 nodes to do it again would cost more than the scan's classification. The
    # JSON is written node by node: a million nodes are never one string.
    if output_format is OutputFormat.json:
        sys.stdout.flush()
        result.write_json(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    elif output_format is OutputFormat.markdown:
        print(fleet_scan_markdown(result), end="")
    else:
        _console().print(fleet_scan_renderable(result))
    _say_saved(output_format, written)


@fleet_app.command("run")
@_argument("kind", metavar="preflight|collect", help="What to run.")
@_argument(
    "arguments",
    nargs=-1,
    metavar="[-- ARGS...]",
    help="The command's own arguments on each host (after --), e.g. -- --image REF.",
)
@click.option(
    "--inventory", type=_PATH, metavar="FILE", help="Without Kubernetes: an Ansible inventory."
)
@click.option("--limit", metavar="PATTERN", help="Ansible host pattern (default: all).")
@click.option("--forks", type=_FORKS, default=10, help="Hosts Ansible runs at once.")
@click.option("--kube", is_flag=True, help="One Job per node on Kubernetes.")
@click.option("--kubeconfig", type=_PATH, metavar="FILE")
@click.option("--context", help="The kubeconfig's context.")
@click.option("--selector", metavar="S", help="The nodes, by label selector.")
@click.option("--node", multiple=True, metavar="NAME", help="A node (repeatable).")
@click.option("--namespace", "-n", default="default", help="Where the Jobs run.")
@click.option("--tool-image", metavar="REF", help="The vllm-triage image the Jobs run.")
@click.option(
    "--runtime-class",
    default="nvidia",
    help="RuntimeClass giving nvidia-smi without a GPU ('' for none).",
)
@click.option("--service-account", help="The Jobs' service account.")
@click.option(
    "--keep-jobs/--no-keep-jobs", default=False, help="Leave the Jobs (their TTL is 1 h)."
)
@click.option("--timeout", type=_RUN_SECONDS, default=900.0, help="Seconds the whole run may take.")
@_case_option(
    "Case folder: each host's result into its fleet/<UTC>/<host>/, the run into fleet-<kind>.json."
)
@_format_option()
def fleet_run_command(
    kind: str,
    arguments: tuple[str, ...],
    inventory: Path | None,
    limit: str | None,
    forks: int,
    kube: bool,
    kubeconfig: Path | None,
    context: str | None,
    selector: str | None,
    node: tuple[str, ...],
    namespace: str,
    tool_image: str | None,
    runtime_class: str,
    service_account: str | None,
    keep_jobs: bool,
    timeout: float,
    case: Path | None,
    output_format: OutputFormat,
) -> None:
    """Run preflight or collect on many hosts through Kubernetes Jobs or Ansible; every reachable
    host's result comes back into the case (exit 1 when a host failed or said no-go)."""
    from vllm_triage.case import case_folder
    from vllm_triage.fleet import FleetRunOptions, fleet_run
    from vllm_triage.render.fleet import fleet_run_markdown, fleet_run_renderable

    if kind not in ("preflight", "collect"):
        raise InputError(f"fleet run: choose preflight or collect, not {kind!r}")
    folder = case_folder(case)
    options = FleetRunOptions(
        kind=kind,  # type: ignore[arg-type]
        case=folder,
        arguments=arguments,
        inventory=inventory,
        limit=limit,
        forks=forks,
        kube=kube,
        kubeconfig=kubeconfig,
        context=context,
        selector=selector,
        nodes=node,
        namespace=namespace,
        tool_image=tool_image,
        runtime_class=runtime_class or None,
        service_account=service_account,
        keep_jobs=keep_jobs,
        timeout=timeout,
    )
    with _console(stderr=True).status(f"fleet run {kind}"):
        result = fleet_run(options)
    _keep_and_print(
        folder, f"fleet-{kind}", result, output_format, fleet_run_markdown, fleet_run_renderable
    )
    if any(host.state != "ok" or host.go is False for host in result.hosts):
        raise click.exceptions.Exit(EXIT_NO_GO)


@knowledge_app.command("check")
@click.option(
    "--unmatched",
    is_flag=True,
    help="List each signature pattern that matches no catalogued message (and no line of the "
    "--corpus logs).",
)
@click.option(
    "--corpus",
    "corpus_dirs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    multiple=True,
    help="A folder of labelled logs (*.log) whose lines count as matched (repeatable). With it, a "
    "signature pattern whose wording is in no producer's message and no line of these logs "
    "fails the check.",
)
@click.option(
    "--covers",
    "covers",
    metavar="SIGNATURE",
    help="Instead of the check, list the catalogued messages each pattern of this signature (id "
    "or name) matches.",
)
def knowledge_check(unmatched: bool, corpus_dirs: tuple[Path, ...], covers: str | None) -> None:
    """Validate every knowledge file, every example, and every tie between the data and the code;
    print how much of the message catalogue (data/messages) the signatures recognise. Given the
    corpus (--corpus), fail on a signature pattern that no producer prints and no real log shows
    (--unmatched lists them without failing)."""
    from vllm_triage.knowledge import load_knowledge
    from vllm_triage.ties import catalogue_check, check_knowledge, signature_coverage

    kb = load_knowledge(cached=False)
    if covers is not None:
        print("\n".join(signature_coverage(kb, covers)))
        return
    problems = check_knowledge(kb)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in the knowledge base", file=sys.stderr)
        raise click.exceptions.Exit(EXIT_NO_GO)
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
    catalogue = catalogue_check(kb, corpus_dirs)
    for line in catalogue.table:
        print(line)
    if unmatched or (corpus_dirs and catalogue.unmatched):
        for line in catalogue.unmatched:
            print(line)
    if corpus_dirs and catalogue.unmatched and not unmatched:
        print(
            f"{len(catalogue.unmatched)} signature pattern(s) whose wording no producer prints "
            "and no corpus log shows",
            file=sys.stderr,
        )
        raise click.exceptions.Exit(EXIT_NO_GO)


@knowledge_app.command("show")
@_argument(
    "topic",
    required=False,
    help="cuda, families, branches, gpus, forward-compat, images, phases, "
    "recipes, signatures, fact-checks, metrics, redaction; a recipe id; or a signature "
    "id/name.",
)
def knowledge_show(topic: str | None) -> None:
    """Print the knowledge base (or one topic of it) with sources and certainty."""
    from vllm_triage.knowledge import load_knowledge
    from vllm_triage.render.knowledge import knowledge_renderable

    _console().print(knowledge_renderable(load_knowledge(), topic))


@knowledge_app.command("patterns")
def knowledge_patterns() -> None:
    """Print every log pattern, one per line, for `grep -E -f` (benchmarks, ad-hoc searches)."""
    from vllm_triage.knowledge import grep_patterns, load_knowledge

    print("\n".join(grep_patterns(load_knowledge())))


# The groups after the commands, in this order, as --help lists them.
for _group in (knowledge_app, case_app, baseline_app, fleet_app, record_app):
    app.add_command(_group)


def main() -> None:
    """Console-script entry point (the root command exits with the documented code)."""
    # A start allocates a few hundred thousand objects that live as long as the process (pydantic,
    # rich, the knowledge base): collect cyclic garbage less often while they load, and do not
    # walk them all once more at exit (gc.freeze: the exit's collection skips them).
    # Together about a sixth of a small command's time.
    gc.set_threshold(100_000, 50, 100)
    atexit.register(gc.freeze)
    app()
