"""`fleet run` without Kubernetes: through Ansible (ansible-runner from Python, the team's own
inventory file), one play over the hosts.

Each host runs `python -m vllm_triage.fleet.remote KIND -- ARGS` (fleet/remote.py), which prints
one JSON envelope; for collect the play then fetches the bundle's archive into the case and
removes the host's work folder. The Python on the host is the host var `vllm_triage_python`,
else `ansible_python_interpreter`, else `python3`: a host where vllm-triage is installed in a
virtual environment names that environment's python.

A host that cannot be reached, or whose command fails, is reported as such; the other hosts'
results are gathered all the same (the play never stops at the first failure).

Nothing from the user is templated on the controller: the remote command's arguments and the
case's path reach the play as `!unsafe` text, `--limit` goes to ansible-playbook's command line
(and holds only pattern characters), and an inventory (or its group_vars / host_vars) holding a
Jinja template anywhere is refused before Ansible reads it. Bundles are fetched into a staging
folder named by a hash of the host; fleet/run.py moves them under the host's safe folder.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vllm_triage.errors import InputError
from vllm_triage.fleet.envelope import HostOutcome, envelope_from_text
from vllm_triage.inputs import display_name

RUN_TASK = "vllm-triage remote command"
FETCH_TASK = "fetch the bundle"
CLEAN_TASK = "remove the work folder"
DEFAULT_FORKS = 10
# Ansible's default ssh_args, but with no master connection persisting after the run.
SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=no"
# Where a host's fetched bundle lands before fleet/run.py moves it under the host's folder.
STAGING_FOLDER = ".incoming"
DEFAULT_CONNECT_TIMEOUT = 10
# Ansible host patterns: names, groups, `:` `,` `&` `!`, wildcards, `~regex`, `[0:3]`. No
# braces, quotes, `%`, `#`, `@file` or spaces: nothing Jinja or the shell could read.
_LIMIT = re.compile(r"[A-Za-z0-9_.:,&!*?\[\]~^$()|+-]{1,1000}")
_JINJA = ("{{", "{%", "{#")
MAX_VARS_FILES = 1000
MAX_VARS_FILE_BYTES = 16 * 1024**2


class Unsafe(str):
    """Text Ansible must never template: written into the play as `!unsafe`."""


class _PlayDumper(yaml.SafeDumper):
    """The play's YAML, with Unsafe strings tagged `!unsafe`."""


_PlayDumper.add_representer(
    Unsafe, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value))
)


@dataclass(frozen=True)
class AnsibleRun:
    """What to run where: the kind and its arguments, the inventory, an optional host pattern."""

    kind: str
    arguments: tuple[str, ...]
    inventory: Path
    fetch_into: Path
    limit: str | None = None
    forks: int = DEFAULT_FORKS
    timeout: float = 900.0
    connect_timeout: int = DEFAULT_CONNECT_TIMEOUT
    remote_timeout: float = 600.0


def playbook(run: AnsibleRun) -> list[dict[str, Any]]:
    """The play, as data (written as YAML for ansible-runner)."""
    python = "{{ vllm_triage_python | default(ansible_python_interpreter | default('python3')) }}"
    argv = [
        python,
        "-m",
        "vllm_triage.fleet.remote",
        run.kind,
        "--timeout",
        f"{run.remote_timeout:g}",
        "--",
        *(Unsafe(argument) for argument in run.arguments),
    ]
    envelope = "(vllm_triage_run.stdout | from_json)"
    tasks: list[dict[str, Any]] = [
        {
            "name": RUN_TASK,
            "ansible.builtin.command": {"argv": argv},
            "register": "vllm_triage_run",
            "changed_when": False,
        }
    ]
    if run.kind == "collect":
        tasks += [
            {
                "name": FETCH_TASK,
                "when": f"{envelope}.archive is string",
                "ansible.builtin.fetch": {
                    "src": f"{{{{ {envelope}.archive }}}}",
                    "dest": "{{ vllm_triage_staging }}/{{ inventory_hostname | hash('sha1') }}/",
                    "flat": True,
                    "fail_on_missing": True,
                },
            },
            {
                "name": CLEAN_TASK,
                "when": f"{envelope}.workdir is string",
                "ansible.builtin.file": {
                    "path": f"{{{{ {envelope}.workdir }}}}",
                    "state": "absent",
                },
                "changed_when": False,
            },
        ]
    return [
        {
            "name": f"vllm-triage fleet run {run.kind}",
            "hosts": "all",
            "gather_facts": False,
            "vars": {"vllm_triage_staging": Unsafe(run.fetch_into / STAGING_FOLDER)},
            "tasks": tasks,
        }
    ]


@dataclass
class _Gathered:
    """The outcome of each host as the play's events report it."""

    outcomes: dict[str, HostOutcome] = field(default_factory=dict)

    def host(self, name: str) -> HostOutcome:
        return self.outcomes.setdefault(name, HostOutcome(host=name))

    def event(self, event: dict[str, Any]) -> bool:
        data = event.get("event_data")
        kind = event.get("event")
        if not isinstance(data, dict) or not isinstance(kind, str) or "host" not in data:
            return True
        outcome = self.host(str(data["host"]))
        res = data.get("res")
        result: dict[str, Any] = res if isinstance(res, dict) else {}
        task = data.get("task")
        if kind == "runner_on_unreachable":
            outcome.state = "unreachable"
            outcome.error = _one_line(result.get("msg")) or "unreachable"
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            outcome.state = "failed"
            stderr = _last_line(result.get("stderr"))
            outcome.error = stderr or _one_line(result.get("msg")) or f"{task} failed"
            if task == RUN_TASK:
                outcome.exit_code = result.get("rc") if isinstance(result.get("rc"), int) else None
        elif kind == "runner_on_ok" and task == RUN_TASK:
            outcome.apply(envelope_from_text(str(result.get("stdout") or ""), "the task's output"))
        elif kind == "runner_on_ok" and task == FETCH_TASK:
            dest = result.get("dest")
            if isinstance(dest, str):
                outcome.fetched.append(Path(dest))
        return True


def _one_line(value: Any) -> str | None:
    if not value:
        return None
    return " ".join(str(value).split())[:500]


def _last_line(value: Any) -> str | None:
    if not value:
        return None
    lines = [line.strip() for line in str(value).splitlines() if line.strip()]
    return lines[-1][:500] if lines else None


def _search_path() -> str | None:
    """A PATH on which ansible-playbook is found: this Python's folder first (a virtual
    environment that is not activated), then the PATH as it is; None when it is on neither.
    (ansible-runner's `binary` would drop the playbook from the command line.)"""
    path = os.environ.get("PATH", os.defpath)
    beside = Path(sys.executable).parent
    if (beside / "ansible-playbook").exists():
        return f"{beside}{os.pathsep}{path}"
    return path if shutil.which("ansible-playbook", path=path) else None


def run_ansible(run: AnsibleRun) -> tuple[list[HostOutcome], list[str]]:
    """Run the play; every host's outcome, and notes (the play's own failure, if any)."""
    try:
        import ansible_runner  # type: ignore[import-untyped]
    except ImportError:
        raise InputError(
            "fleet run through Ansible needs ansible-runner and ansible-core "
            "(pip install 'vllm-triage[fleet]')"
        ) from None
    search_path = _search_path()
    if search_path is None:
        raise InputError("ansible-playbook is not installed (pip install ansible-core)")
    inventory = run.inventory.resolve()
    if not inventory.is_file():
        raise InputError(f"{display_name(run.inventory)}: no such inventory file")
    check_limit(run.limit)
    check_inventory(inventory, display_name(run.inventory))
    gathered = _Gathered()
    with tempfile.TemporaryDirectory(prefix="vllm-triage-ansible-") as private:
        project = Path(private) / "project"
        project.mkdir()
        (project / "fleet.yml").write_text(
            yaml.dump(playbook(run), Dumper=_PlayDumper, sort_keys=False)
        )
        result = ansible_runner.run(
            private_data_dir=private,
            playbook="fleet.yml",
            inventory=str(inventory),
            limit=run.limit,
            forks=run.forks,
            quiet=True,
            timeout=int(run.timeout),
            event_handler=gathered.event,
            envvars={
                "PATH": search_path,
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_RETRY_FILES_ENABLED": "False",
                "ANSIBLE_TIMEOUT": str(run.connect_timeout),
                "ANSIBLE_LOCAL_TEMP": str(Path(private) / "tmp"),
                "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
                # No ssh master left running for a minute after the command has returned.
                "ANSIBLE_SSH_ARGS": os.environ.get("ANSIBLE_SSH_ARGS", SSH_ARGS),
            },
            settings={"suppress_ansible_output": True},
        )
        notes = []
        if result.status == "timeout":
            notes.append(
                f"the play did not finish within {run.timeout:g} s: hosts without a result were cut off"
            )
        elif result.status not in ("successful", "failed"):
            notes.append(f"ansible-runner ended with status {result.status}")
        if not gathered.outcomes:
            stdout = _last_line(_read_stdout(result))
            raise InputError(
                f"Ansible ran no host of {display_name(run.inventory)}"
                + (f": {stdout}" if stdout else "")
            )
    return list(gathered.outcomes.values()), notes


def check_limit(limit: str | None) -> None:
    """Refuse a --limit that is not a plain Ansible host pattern."""
    if limit is not None and not _LIMIT.fullmatch(limit):
        raise InputError(
            "--limit: use host and group names with Ansible's pattern characters "
            "(: , & ! * ? ~ [ ]); no braces, quotes, spaces or @file"
        )


def check_inventory(inventory: Path, what: str) -> None:
    """Refuse an inventory Ansible would template or could not expand in bounded memory: a Jinja
    template in the file or in the group_vars / host_vars beside it (Ansible trusts inventory
    text, and would run its lookups on the controller), or more hosts and groups than
    fleet/inventory.py's bounds."""
    from vllm_triage.fleet.inventory import read_inventory

    files = [inventory]
    for folder in ("group_vars", "host_vars"):
        beside = inventory.parent / folder
        if beside.is_dir():
            files += sorted(path for path in beside.rglob("*") if path.is_file())[
                : MAX_VARS_FILES + 1
            ]
    if len(files) > MAX_VARS_FILES:
        raise InputError(f"{what}: more than {MAX_VARS_FILES} group_vars / host_vars files")
    for path in files:
        name = display_name(path)
        with path.open("rb") as stream:
            data = stream.read(MAX_VARS_FILE_BYTES + 1)
        if len(data) > MAX_VARS_FILE_BYTES:
            raise InputError(f"{name}: larger than {MAX_VARS_FILE_BYTES // 1024**2} MiB; not read")
        text = data.decode("utf-8", "replace")
        for marker in _JINJA:
            if marker in text:
                line = text.count("\n", 0, text.index(marker)) + 1
                raise InputError(
                    f"{name}:{line}: a Jinja template ({marker}); fleet run gives Ansible no "
                    "templates from its inputs (write the value itself)"
                )
    read_inventory(inventory)


def _read_stdout(result: Any) -> str:
    try:
        return str(result.stdout.read())[-4000:]
    except (AttributeError, OSError, ValueError):
        return ""
