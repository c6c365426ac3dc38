"""Where a fleet's nodes come from, without a Kubernetes API server: `kubectl get nodes -o json`
output (with `kubectl get pods -A -o json` for the GPU work on each node), or an inventory (YAML,
CSV, or an Ansible inventory in INI or YAML with host vars).

Large inputs are parsed with orjson into plain dicts (a 10,000-node NodeList is 100 MB); no model
is validated per node.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from vllm_triage.errors import InputError
from vllm_triage.fleet.labels import (
    HOSTNAME,
    NodeFacts,
    count_of,
    gpu_work,
    is_gpu_node,
    labelled_facts,
    node_facts,
    printable_text,
    timestamp_of,
)
from vllm_triage.inputs import display_name
from vllm_triage.models import InputFile
from vllm_triage.safejson import read_capped

# `kubectl get nodes -o json` is 5 to 15 KB a node: 512 MiB holds 35,000 nodes and more.
MAX_NODE_LIST_BYTES = 512 * 1024**2
MAX_POD_LIST_BYTES = 1024**3
MAX_INVENTORY_BYTES = 64 * 1024**2
MAX_HOSTS_EXPANDED = 100_000


class FleetInputError(InputError):
    """A node list, pod list or inventory the scan cannot use; one line naming the file."""


def parse_large_json(data: bytes, what: str) -> Any:
    """A large JSON document (a NodeList) into plain Python objects, through orjson when it is
    installed (3x the standard library's speed), else json; errors are one line."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency; json is the fallback
        import json

        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise FleetInputError(f"{what}: not JSON ({str(exc).splitlines()[0]})") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FleetInputError(f"{what}: not JSON ({str(exc).splitlines()[0]})") from None


def _read(path: Path, what: str, cap: int) -> bytes:
    data = read_capped(path, what, cap)
    if len(data) > cap:
        raise FleetInputError(f"{what}: larger than {cap // 1024**2} MiB; not read")
    return data


def _made_from(what: str, data: bytes) -> InputFile:
    return InputFile(name=what, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


def _items(document: Any, what: str, kind: str) -> list[Any]:
    """The objects of a `kubectl get ... -o json` output: a List/<Kind>List, one object, or a
    bare JSON array."""
    if isinstance(document, list):
        return document
    if not isinstance(document, dict):
        raise FleetInputError(f"{what}: expected a {kind}List (kubectl get ... -o json)")
    items = document.get("items")
    if isinstance(items, list):
        return items
    if document.get("kind") == kind:
        return [document]
    raise FleetInputError(
        f"{what}: no items; expected `kubectl get {kind.lower()}s -o json` output"
    )


def _labels_only(document: Any) -> bool:
    """A node's labels alone (`kubectl get node N -o jsonpath='{.metadata.labels}'`)."""
    return (
        isinstance(document, dict)
        and "items" not in document
        and "kind" not in document
        and all(isinstance(value, str) for value in document.values())
        and any(key.startswith("nvidia.com/") for key in document)
    )


def nodes_from_file(
    path: Path, gpu_pods: Mapping[str, int] | None
) -> tuple[Iterator[NodeFacts], int, InputFile]:
    """The GPU nodes of a `kubectl get nodes -o json` file (or one node's labels), how many
    node objects it holds, and the file as an input (sha256 and size)."""
    what = display_name(path)
    data = _read(path, what, MAX_NODE_LIST_BYTES)
    document = parse_large_json(data, what)
    made_from = _made_from(what, data)
    if _labels_only(document):
        name = printable_text(str(document.get(HOSTNAME) or path.stem))[:253]
        return iter([labelled_facts(name, document, None, gpu_pods)]), 1, made_from
    items = _items(document, what, "Node")
    return nodes_from_items(items, gpu_pods), len(items), made_from


def nodes_from_items(items: list[Any], gpu_pods: Mapping[str, int] | None) -> Iterator[NodeFacts]:
    """The GPU nodes among NodeList items (plain dicts)."""
    for item in items:
        facts = node_facts(item, gpu_pods)
        if facts is not None:
            yield facts


def gpu_pods_from_file(path: Path) -> tuple[dict[str, int], InputFile]:
    """Running pods requesting nvidia.com/gpu per node, from `kubectl get pods -A -o json`."""
    what = display_name(path)
    data = _read(path, what, MAX_POD_LIST_BYTES)
    document = parse_large_json(data, what)
    return gpu_work(_items(document, what, "Pod")), _made_from(what, data)


# --- inventories --------------------------------------------------------------------------------

# Host var or column names an inventory may use for each fact (GFD's label names work too).
_DRIVER_KEYS = ("nvidia_driver_version", "nvidia_driver", "driver_version", "driver")
_GPU_KEYS = ("nvidia_gpu_product", "gpu_product", "gpu_model", "gpu")
_COUNT_KEYS = ("nvidia_gpu_count", "gpu_count")
_CEILING_KEYS = ("nvidia_cuda_version", "cuda_ceiling", "driver_cuda")
_PODS_KEYS = ("gpu_pods", "gpu_jobs", "gpu_work")
_STAMP_KEYS = ("facts_timestamp", "gfd_timestamp")
_NAME_KEYS = ("name", "host", "hostname", "node", "inventory_hostname")


def _first(values: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = values.get(key)
        if value not in (None, ""):
            return value
    return None


def _busy(value: Any) -> int | None:
    """GPU work from an inventory: a count, or yes/no."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    text = str(value).strip().lower()
    if text in ("true", "yes", "busy"):
        return 1
    if text in ("false", "no", "idle", ""):
        return 0
    return count_of(text)


def inventory_facts(name: str, values: Mapping[str, Any]) -> NodeFacts | None:
    """One inventory host's facts (host vars, a CSV row or a YAML entry); None for a host that
    says nothing about GPUs."""
    labels = values.get("labels")
    merged: dict[str, Any] = dict(labels) if isinstance(labels, dict) else {}
    merged.update(values)
    facts = labelled_facts(name, merged, None, None)
    driver = _first(merged, _DRIVER_KEYS)
    gpu = _first(merged, _GPU_KEYS)
    ceiling = _first(merged, _CEILING_KEYS)
    count = _first(merged, _COUNT_KEYS)
    stamp = _first(merged, _STAMP_KEYS)
    if not (driver or gpu or facts.driver or facts.gpu or is_gpu_node(merged, None)):
        return None
    return facts._replace(
        name=printable_text(name)[:253],
        driver=printable_text(str(driver).strip())[:128] if driver is not None else facts.driver,
        gpu=printable_text(str(gpu).strip())[:128] if gpu is not None else facts.gpu,
        gpu_count=count_of(count) if count is not None else facts.gpu_count,
        ceiling=printable_text(str(ceiling).strip())[:32] if ceiling is not None else facts.ceiling,
        timestamp=timestamp_of(stamp) if stamp is not None else facts.timestamp,
        gpu_pods=_busy(_first(merged, _PODS_KEYS)),
    )


def nodes_from_inventory(path: Path) -> tuple[list[NodeFacts], int, InputFile]:
    """The GPU hosts of an inventory file, how many hosts it lists, and the file as an input.
    The format follows the name: .csv, .yaml/.yml/.json (a node list, or an Ansible YAML
    inventory), anything else an Ansible INI inventory."""
    hosts, made_from = inventory_hosts(path)
    found = [facts for name, values in hosts.items() if (facts := inventory_facts(name, values))]
    return found, len(hosts), made_from


def inventory_hosts(path: Path) -> tuple[dict[str, dict[str, Any]], InputFile]:
    """Every host of an inventory file with its vars (see nodes_from_inventory)."""
    what = display_name(path)
    data = _read(path, what, MAX_INVENTORY_BYTES)
    text = data.decode("utf-8", errors="replace")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        hosts = _csv_hosts(text, what)
    elif suffix in (".yaml", ".yml", ".json"):
        hosts = _yaml_hosts(text, what)
    else:
        hosts = ini_hosts(text, what)
    return hosts, _made_from(what, data)


def _csv_hosts(text: str, what: str) -> dict[str, dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    fields = [name.strip().lower() for name in reader.fieldnames or []]
    if not any(name in fields for name in _NAME_KEYS):
        raise FleetInputError(
            f"{what}: a CSV inventory needs a name column ({', '.join(_NAME_KEYS)})"
        )
    hosts: dict[str, dict[str, Any]] = {}
    for row in reader:
        values = {str(k).strip().lower(): (v or "").strip() for k, v in row.items() if k}
        name = _first(values, _NAME_KEYS)
        if name:
            hosts[str(name)] = values
    return hosts


def _yaml_hosts(text: str, what: str) -> dict[str, dict[str, Any]]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise FleetInputError(f"{what}: not YAML{where}") from None
    if isinstance(document, dict) and isinstance(document.get("nodes"), list):
        document = document["nodes"]
    if isinstance(document, list):
        hosts: dict[str, dict[str, Any]] = {}
        for entry in document:
            if isinstance(entry, dict) and (name := _first(entry, _NAME_KEYS)):
                hosts[str(name)] = entry
        return hosts
    if isinstance(document, dict):
        return ansible_yaml_hosts(document)
    raise FleetInputError(f"{what}: expected a list of nodes or an Ansible YAML inventory")


def ansible_yaml_hosts(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Hosts and their vars of an Ansible YAML inventory (groups with hosts, vars, children;
    a group's vars apply to its hosts and its children's, the host's own win)."""
    hosts: dict[str, dict[str, Any]] = {}

    def walk(group: Any, inherited: dict[str, Any], depth: int) -> None:
        if not isinstance(group, dict) or depth > 32:
            return
        scope = dict(inherited)
        if isinstance(group.get("vars"), dict):
            scope.update(group["vars"])
        members = group.get("hosts")
        if isinstance(members, dict):
            for name, own in members.items():
                for host in expand_pattern(str(name)):
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


def expand_pattern(name: str) -> list[str]:
    """An Ansible host pattern such as `gpu[01:16].example` as its hosts."""
    match = _RANGE.search(name)
    if not match:
        return [name]
    start, end, step_text = match.groups()
    step = int(step_text or 1)
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") else 0
        values = [str(i).zfill(width) for i in range(int(start), int(end) + 1, max(step, 1))]
    elif start.isalpha() and end.isalpha():
        values = [chr(c) for c in range(ord(start), ord(end) + 1, max(step, 1))]
    else:
        return [name]
    if len(values) > MAX_HOSTS_EXPANDED:
        raise FleetInputError(f"host pattern {name!r}: more than {MAX_HOSTS_EXPANDED} hosts")
    head, tail = name[: match.start()], name[match.end() :]
    return [host for value in values for host in expand_pattern(head + value + tail)]


def _ini_value(text: str) -> Any:
    """An INI inventory value as Ansible reads simple literals."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def ini_hosts(text: str, what: str) -> dict[str, dict[str, Any]]:
    """Hosts and their vars of an Ansible INI inventory ([group], [group:vars],
    [group:children]; `host key=value ...` lines)."""
    members: dict[str, list[str]] = {"ungrouped": []}
    group_vars: dict[str, dict[str, Any]] = {}
    children: dict[str, list[str]] = {}
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
            children.setdefault(section, []).append(words[0])
        else:
            values: dict[str, Any] = {}
            for word in words[1:]:
                key, sep, value = word.partition("=")
                if not sep:
                    raise FleetInputError(f"{what}:{number}: expected key=value after the host")
                values[key] = _ini_value(value)
            for host in expand_pattern(words[0]):
                members[section].append(host)
                own.setdefault(host, {}).update(values)

    def scopes(group: str, seen: frozenset[str]) -> dict[str, dict[str, Any]]:
        """host -> vars of this group (its children's hosts too), inner groups winning."""
        found: dict[str, dict[str, Any]] = {}
        for child in children.get(group, []):
            if child not in seen:
                for host, values in scopes(child, seen | {child}).items():
                    found.setdefault(host, {}).update(values)
        for host in members.get(group, []):
            found.setdefault(host, {})
        for values in found.values():
            for key, value in group_vars.get(group, {}).items():
                values.setdefault(key, value)
        return found

    hosts: dict[str, dict[str, Any]] = {}
    for group in list(members):
        for host, values in scopes(group, frozenset({group})).items():
            merged = hosts.setdefault(host, {})
            for key, value in values.items():
                merged.setdefault(key, value)
    for group, values in group_vars.items():  # [all:vars]
        if group == "all":
            for merged in hosts.values():
                for key, value in values.items():
                    merged.setdefault(key, value)
    for host, values in own.items():
        hosts[host].update(values)
    return hosts
