"""Rollout waves for a driver change: one canary node without GPU work first, then batches of a
chosen size; nodes running GPU work only after every idle one, so never in the first waves while
idle nodes remain; nodes that already qualify are left out.

Which nodes a change helps: needs_upgrade (the image cannot run until then) and forward_compat
(it runs today only through the cuda-compat package; the upgrade makes it native). ready nodes
need nothing; unsupported nodes no driver helps; unknown nodes are checked first, not changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllm_triage.fleet.models import NodeView

CHANGED = ("needs_upgrade", "forward_compat")


def plan_waves(nodes: Sequence[NodeView], wave_size: int) -> tuple[list[list[str]], list[str]]:
    """The waves (node names) and notes on what the plan could not avoid."""
    if wave_size < 1:
        raise ValueError("wave_size must be at least 1")
    candidates = [node for node in nodes if node.status in CHANGED]
    if not candidates:
        return [], []
    # Idle first (fresh labels before stale ones, then by name); busy ones after, fewest GPU
    # pods first. An unknown GPU workload (None) is treated as idle and said so in a note.
    idle = sorted(
        (n for n in candidates if not n.gpu_pods),
        key=lambda n: (n.stale, n.status != "needs_upgrade", n.name),
    )
    busy = sorted((n for n in candidates if n.gpu_pods), key=lambda n: (n.gpu_pods, n.name))
    notes: list[str] = []
    order = [n.name for n in idle] + [n.name for n in busy]
    waves = [order[:1]] + [order[i : i + wave_size] for i in range(1, len(order), wave_size)]
    if not idle:
        notes.append(
            f"every node the change is for runs GPU work: drain the canary {order[0]} first "
            "(kubectl drain, or stop its jobs) before changing its driver"
        )
    elif busy and len(waves) > 1 and any(name in waves[1] for name in (n.name for n in busy)):
        notes.append(
            "too few idle nodes: the first batch after the canary includes nodes with GPU work; "
            "drain them before their wave"
        )
    if idle and idle[0].stale:
        notes.append(
            f"the canary {idle[0].name} has stale labels (every idle candidate does): confirm "
            "its driver on the node first"
        )
    return waves, notes
