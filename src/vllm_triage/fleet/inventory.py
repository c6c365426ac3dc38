"""Inventories without Kubernetes: CSV, a YAML node list, or an Ansible inventory (INI or YAML,
groups with vars and children, host patterns such as `gpu[01:16]`), as hosts with their vars.

Every expansion is bounded before it happens: a host pattern's size is the product of its
ranges, counted before one host is made; groups walked (a YAML alias makes one group many
children), host memberships and the vars they carry are counted against one budget; YAML
nesting and CSV fields have limits. Past any of them the inventory is refused in one line.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import math
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from vllm_triage.fleet.errors import FleetInputError
from vllm_triage.inputs import display_name
from vllm_triage.models import InputFile
from vllm_triage.safejson import read_capped

MAX_INVENTORY_BYTES = 64 * 1024**2
MAX_HOSTS_EXPANDED = 100_000  # hosts of one inventory, every pattern expanded
MAX_GROUPS_VISITED = 100_000  # group visits, children reached through every parent
MAX_MEMBERSHIP_WORK = 5_000_000  # host memberships times the vars each one merges
MAX_GROUP_DEPTH = 32
MAX_YAML_DEPTH = 64
MAX_CSV_FIELD = 128 * 1024  # the csv module's own default limit, named

# The columns or keys an inventory may name its hosts by.
NAME_KEYS = ("name", "host", "hostname", "node", "inventory_hostname")


class Budget:
    """The work an inventory may make us do, spent as it is done and refused past its limit."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.hosts: set[str] = set()
        self.groups = 0
        self.work = 0

    def group(self) -> None:
        self.groups += 1
        if self.groups > MAX_GROUPS_VISITED:
            raise FleetInputError(
                f"{self.what}: its groups expand to more than {MAX_GROUPS_VISITED:,} group "
                "visits (children reached again and again, e.g. through YAML aliases); not read"
            )

    def members(self, count: int, carried: int) -> None:
        """`count` hosts joining a group that gives each `carried` vars."""
        self.work += count * (1 + carried)
        if self.work > MAX_MEMBERSHIP_WORK:
            raise FleetInputError(
                f"{self.what}: its groups give hosts their vars more than "
                f"{MAX_MEMBERSHIP_WORK:,} times; not read"
            )

    def host(self, name: str) -> None:
        if name not in self.hosts:
            self.hosts.add(name)
            if len(self.hosts) > MAX_HOSTS_EXPANDED:
                raise FleetInputError(
                    f"{self.what}: more than {MAX_HOSTS_EXPANDED:,} hosts; not read"
                )


def first_value(values: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The first of the keys with a value that is not empty."""
    for key in keys:
        value = values.get(key)
        if value not in (None, ""):
            return value
    return None


def read_inventory(path: Path) -> tuple[dict[str, dict[str, Any]], InputFile]:
    """Every host of an inventory file with its vars, and the file as an input. The format
    follows the name: .csv, .yaml/.yml/.json (a node list, or an Ansible YAML inventory),
    anything else an Ansible INI inventory."""
    what = display_name(path)
    data = read_capped(path, what, MAX_INVENTORY_BYTES)
    if len(data) > MAX_INVENTORY_BYTES:
        raise FleetInputError(f"{what}: larger than {MAX_INVENTORY_BYTES // 1024**2} MiB; not read")
    made = InputFile(name=what, sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    text = data.decode("utf-8", errors="replace")
    del data  # a 64 MiB inventory is held once, as text
    budget = Budget(what)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        hosts = csv_hosts(text, what, budget)
    elif suffix in (".yaml", ".yml", ".json"):
        hosts = yaml_hosts(text, what, budget)
    else:
        hosts = ini_hosts(text, what, budget)
    return hosts, made


_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def csv_hosts(text: str, what: str, budget: Budget) -> dict[str, dict[str, Any]]:
    """A CSV inventory: one host a row, named by a name column."""
    hosts: dict[str, dict[str, Any]] = {}
    # Lines one at a time (io.StringIO would hold the text again, four bytes a character).
    reader = csv.DictReader(line.group() for line in _LINE.finditer(text))
    try:
        fields = [name.strip().lower() for name in reader.fieldnames or []]
        if not any(name in fields for name in NAME_KEYS):
            raise FleetInputError(
                f"{what}: a CSV inventory needs a name column ({', '.join(NAME_KEYS)})"
            )
        for row in reader:
            values = {str(k).strip().lower(): (v or "").strip() for k, v in row.items() if k}
            if any(len(value) > MAX_CSV_FIELD for value in values.values()):
                raise FleetInputError(
                    f"{what}:{reader.line_num}: a field longer than {MAX_CSV_FIELD:,} characters"
                )
            name = first_value(values, NAME_KEYS)
            if name:
                budget.host(str(name))
                hosts[str(name)] = values
    except csv.Error as exc:  # a field past the csv module's limit, a NUL, a stray quote
        raise FleetInputError(f"{what}:{reader.line_num}: not CSV ({exc})") from None
    return hosts


def _yaml_depth_checked(text: str, what: str) -> None:
    """Refuse YAML nested deeper than MAX_YAML_DEPTH, from the parser's events (no object is
    built: building a 50,000-deep document would exhaust the stack)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else 0
                    raise FleetInputError(
                        f"{what}: YAML nested deeper than {MAX_YAML_DEPTH} levels at line {line}"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        raise FleetInputError(f"{what}: not YAML{_where(exc)}") from None


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f" at line {mark.line + 1}" if mark else ""


def yaml_hosts(text: str, what: str, budget: Budget) -> dict[str, dict[str, Any]]:
    """A YAML inventory: a list of nodes (or {nodes: [...]}), or an Ansible YAML inventory."""
    _yaml_depth_checked(text, what)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FleetInputError(f"{what}: not YAML{_where(exc)}") from None
    if isinstance(document, dict) and isinstance(document.get("nodes"), list):
        document = document["nodes"]
    if isinstance(document, list):
        hosts: dict[str, dict[str, Any]] = {}
        for entry in document:
            if isinstance(entry, dict) and (name := first_value(entry, NAME_KEYS)):
                budget.host(str(name))
                hosts[str(name)] = entry
        return hosts
    if isinstance(document, dict):
        return ansible_yaml_hosts(document, what, budget)
    raise FleetInputError(f"{what}: expected a list of nodes or an Ansible YAML inventory")


def ansible_yaml_hosts(
    document: dict[str, Any], what: str, budget: Budget
) -> dict[str, dict[str, Any]]:
    """Hosts and their vars of an Ansible YAML inventory (groups with hosts, vars, children;
    a group's vars apply to its hosts and its children's, the host's own win)."""
    hosts: dict[str, dict[str, Any]] = {}

    def walk(group: Any, inherited: dict[str, Any], depth: int) -> None:
        if not isinstance(group, dict):
            return
        budget.group()
        if depth > MAX_GROUP_DEPTH:
            raise FleetInputError(
                f"{what}: groups nested deeper than {MAX_GROUP_DEPTH} levels (or a group that "
                "contains itself)"
            )
        scope = dict(inherited)
        if isinstance(group.get("vars"), dict):
            scope.update(group["vars"])
        members = group.get("hosts")
        if isinstance(members, dict):
            for name, own in members.items():
                expanded = expand_pattern(str(name), budget)
                budget.members(len(expanded), len(scope))
                for host in expanded:
                    values = hosts.setdefault(host, {})
                    values.update({k: v for k, v in scope.items() if k not in values})
                    if isinstance(own, dict):
                        values.update(own)
        children = group.get("children")
        if isinstance(children, dict):
            for child in children.values():
                walk(child, scope, depth + 1)

    for group in document.values():
        walk(group, {}, 0)
    return hosts


_RANGE = re.compile(r"\[([0-9]+|[a-z]):([0-9]+|[a-z])(?::([0-9]+))?\]")


def _range_values(start: str, end: str, step_text: str | None) -> range | None:
    """The numbers (or letters' code points) of one range; None when it is not a range."""
    step = max(int(step_text or 1), 1)
    if start.isdigit() and end.isdigit():
        return range(int(start), int(end) + 1, step)
    if start.isalpha() and end.isalpha():
        return range(ord(start), ord(end) + 1, step)
    return None


def expand_pattern(name: str, budget: Budget | None = None) -> list[str]:
    """An Ansible host pattern such as `gpu[01:16].example` as its hosts; its size (the product
    of its ranges) is checked before any host is made."""
    matches = [m for m in _RANGE.finditer(name) if _range_values(*m.groups()) is not None]
    if not matches:
        if budget is not None:
            budget.host(name)
        return [name]
    ranges = [_range_values(*m.groups()) for m in matches]
    size = math.prod(len(r) for r in ranges if r is not None)
    left = MAX_HOSTS_EXPANDED - (len(budget.hosts) if budget is not None else 0)
    if size > left:
        raise FleetInputError(
            f"host pattern {name[:200]!r}: {size:,} hosts, more than {MAX_HOSTS_EXPANDED:,} in all"
        )
    choices: list[list[str]] = []
    for match, values in zip(matches, ranges, strict=True):
        assert values is not None
        start = match.group(1)
        if start.isdigit():
            width = len(start) if start.startswith("0") else 0
            choices.append([str(i).zfill(width) for i in values])
        else:
            choices.append([chr(c) for c in values])
    pieces = [name[a.end() : b.start()] for a, b in itertools.pairwise(matches)]
    head, tail = name[: matches[0].start()], name[matches[-1].end() :]
    hosts = []
    for picked in itertools.product(*choices):
        middle = "".join(value + piece for value, piece in zip(picked, [*pieces, ""], strict=True))
        hosts.append(head + middle + tail)
    if budget is not None:
        for host in hosts:
            budget.host(host)
    return hosts


def _ini_value(text: str) -> Any:
    """An INI inventory value as Ansible reads simple literals."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def ini_hosts(text: str, what: str, budget: Budget | None = None) -> dict[str, dict[str, Any]]:
    """Hosts and their vars of an Ansible INI inventory ([group], [group:vars],
    [group:children]; `host key=value ...` lines)."""
    budget = budget or Budget(what)
    members: dict[str, list[str]] = {"ungrouped": []}
    group_vars: dict[str, dict[str, Any]] = {}
    children: dict[str, dict[str, None]] = {}
    own: dict[str, dict[str, Any]] = {}
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section, _, kind = line[1:-1].partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise FleetInputError(f"{what}:{number}: unknown section kind {kind!r}")
            members.setdefault(section, [])
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise FleetInputError(f"{what}:{number}: {exc}") from None
        if not words:
            continue
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep:
                raise FleetInputError(f"{what}:{number}: expected key=value in [{section}:vars]")
            group_vars.setdefault(section, {})[key.strip()] = _ini_value(
                " ".join(shlex.split(value, comments=True))
            )
        elif kind == "children":
            children.setdefault(section, {})[words[0]] = None  # a child named twice is one
        else:
            values: dict[str, Any] = {}
            for word in words[1:]:
                key, sep, value = word.partition("=")
                if not sep:
                    raise FleetInputError(f"{what}:{number}: expected key=value after the host")
                values[key] = _ini_value(value)
            for host in expand_pattern(words[0], budget):
                members[section].append(host)
                own.setdefault(host, {}).update(values)

    def scopes(group: str, seen: frozenset[str]) -> dict[str, dict[str, Any]]:
        """host -> vars of this group (its children's hosts too), inner groups winning."""
        budget.group()
        if len(seen) > MAX_GROUP_DEPTH:
            raise FleetInputError(
                f"{what}: groups nested deeper than {MAX_GROUP_DEPTH} levels ([{group}:children])"
            )
        found: dict[str, dict[str, Any]] = {}
        for child in children.get(group, {}):
            if child not in seen:
                for host, values in scopes(child, seen | {child}).items():
                    found.setdefault(host, {}).update(values)
        for host in members.get(group, []):
            found.setdefault(host, {})
        carried = group_vars.get(group, {})
        budget.members(len(found), len(carried))
        for values in found.values():
            for key, value in carried.items():
                values.setdefault(key, value)
        return found

    hosts: dict[str, dict[str, Any]] = {}
    for group in list(members):
        for host, values in scopes(group, frozenset({group})).items():
            budget.members(1, len(values))
            merged = hosts.setdefault(host, {})
            for key, value in values.items():
                merged.setdefault(key, value)
    for group, values in group_vars.items():  # [all:vars]
        if group == "all":
            budget.members(len(hosts), len(values))
            for merged in hosts.values():
                for key, value in values.items():
                    merged.setdefault(key, value)
    for host, values in own.items():
        hosts[host].update(values)
    return hosts
