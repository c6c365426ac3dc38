"""Model files: the model path of the launch (or --model-path), mapped through the container's
mounts to the host; whether it exists, whether the container's user can read it (uid/gid from
inspect, judged by the mode bits), config.json, and the safetensors index against the shards.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from vllm_triage.bundle.models import ModelFilesFacts, Mount
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import NotAvailable, Probe, ProbeContext, ProbeOutput
from vllm_triage.collect.probes.container import container_for
from vllm_triage.collect.probes.vllm import launch_args

_INDEX = "model.safetensors.index.json"
_FILE_LIMIT = 10_000


def looks_like_hub_id(model: str) -> bool:
    """`org/name` with no path markers: a Hugging Face repo id rather than a local folder."""
    return (
        not model.startswith(("/", ".", "~"))
        and model.count("/") == 1
        and all(part and part not in (".", "..") for part in model.split("/"))
    )


def map_to_host(path: str, mounts: list[Mount]) -> tuple[str, Mount | None]:
    """The host path behind a container path, through the mount with the longest destination."""
    target = PurePosixPath(path)
    best: Mount | None = None
    for mount in mounts:
        destination = PurePosixPath(mount.destination)
        if (target == destination or destination in target.parents) and (
            best is None or len(destination.parts) > len(PurePosixPath(best.destination).parts)
        ):
            best = mount
    if best is None:
        return path, None
    relative = target.relative_to(best.destination)
    return str(PurePosixPath(best.source) / relative), best


def _ids(user: str | None) -> tuple[int, int] | None:
    """uid and gid from a container's User ("", "1000", "1000:1000"); None for a user name."""
    if not user:
        return 0, 0
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return None
    return int(uid), int(gid or uid)


def _may(mode: os.stat_result, ids: tuple[int, int] | None, need: int) -> bool:
    """Whether uid/gid may read (need=4) or enter (need=1) by the mode bits; root may do all."""
    uid, gid = ids if ids is not None else (os.getuid(), os.getgid())
    if uid == 0:
        return True
    if mode.st_uid == uid:
        return bool(mode.st_mode & (need << 6))
    if mode.st_gid == gid:
        return bool(mode.st_mode & (need << 3))
    return bool(mode.st_mode & need)


def check_model_folder(
    facts: ModelFilesFacts, folder: Path, ids: tuple[int, int] | None
) -> ModelFilesFacts:
    """Fill in existence, readability, config.json, index consistency and size for a folder."""
    try:
        info = folder.stat()
    except FileNotFoundError:
        facts.exists = False
        facts.problems.append(f"{facts.container_path or facts.model}: does not exist")
        return facts
    except PermissionError:
        facts.exists, facts.readable = None, False
        facts.problems.append(f"{folder}: cannot be inspected (permission denied for the tool)")
        return facts
    facts.exists = True
    who = "uid:gid " + (":".join(map(str, ids)) if ids else "of this tool")
    facts.checked_as = who
    if not stat.S_ISDIR(info.st_mode):
        facts.readable = _may(info, ids, 4)
        if not facts.readable:
            facts.problems.append(f"{folder.name}: not readable by {who}")
        return facts
    if not (_may(info, ids, 4) and _may(info, ids, 1)):
        facts.readable = False
        facts.problems.append(f"the model folder is not readable/enterable by {who}")
    entries: dict[str, os.stat_result] = {}
    try:
        for index, entry in enumerate(os.scandir(folder)):
            if index >= _FILE_LIMIT:
                break
            if entry.is_file():
                entries[entry.name] = entry.stat()
    except PermissionError:
        facts.problems.append(f"{folder}: cannot be listed (permission denied for the tool)")
        return facts
    facts.unreadable = sorted(name for name, mode in entries.items() if not _may(mode, ids, 4))[:20]
    if facts.readable is None:
        facts.readable = not facts.unreadable
    if facts.unreadable:
        facts.problems.append(f"{len(facts.unreadable)} file(s) not readable by {who}")
    facts.config_json = "config.json" in entries
    if not facts.config_json:
        facts.problems.append("no config.json in the model folder")
    facts.total_bytes = sum(mode.st_size for mode in entries.values())
    if _INDEX in entries:
        _check_index(facts, folder / _INDEX, entries)
    else:
        facts.shard_count = sum(1 for name in entries if name.endswith(".safetensors"))
    return facts


def _check_index(facts: ModelFilesFacts, index: Path, entries: dict[str, os.stat_result]) -> None:
    try:
        document: Any = json.loads(index.read_text(encoding="utf-8"))
        shards = set((document.get("weight_map") or {}).values())
    except (OSError, ValueError, AttributeError):
        facts.index_consistent = False
        facts.problems.append(f"{_INDEX} cannot be read as JSON")
        return
    facts.shard_count = len(shards)
    facts.missing_shards = sorted(s for s in shards if s not in entries)[:20]
    empty = sorted(s for s in shards if s in entries and entries[s].st_size == 0)
    facts.index_consistent = not facts.missing_shards and not empty
    if facts.missing_shards:
        facts.problems.append(
            f"{len(facts.missing_shards)} shard(s) listed in the index are missing"
        )
    if empty:
        facts.problems.append(f"{len(empty)} shard(s) are empty files: {', '.join(empty[:5])}")


def collect(ctx: ProbeContext) -> ProbeOutput:
    model = ctx.options.model_path
    launch = launch_args(ctx) if model is None else None
    model = model or (launch.model if launch else None)
    if not model:
        raise NotAvailable(reasons.NO_MODEL)
    notes: list[str] = []
    container = container_for(ctx, notes)
    if looks_like_hub_id(model) and not ctx.host_file(model).exists():
        notes.append(
            f"{model} is a Hugging Face repo id, not a local folder: the server downloads it at "
            "start (needs network, a token for gated models, and a writable cache)"
        )
        return ProbeOutput(facts=ModelFilesFacts(model=model, kind="hub_id"), notes=notes)
    host_path, mount = map_to_host(model, container.mounts) if container else (model, None)
    facts = ModelFilesFacts(
        model=model,
        kind="local",
        container_path=model if container else None,
        host_path=host_path,
        mount_read_write=mount.read_write if mount else None,
    )
    if container and mount is None:
        facts.problems.append(
            f"{model} is not under any mount of the container (inside the image?)"
        )
        return ProbeOutput(facts=facts, notes=notes)
    ids = _ids(container.user) if container else None
    check_model_folder(facts, ctx.host_file(host_path), ids)
    return ProbeOutput(
        files=[CapturedFile("model/files.json", document=facts.model_dump(mode="json"))],
        facts=facts,
        notes=notes,
    )


PROBE = Probe("model_files", collect, "model path, mount, readability, config.json, shard index")
