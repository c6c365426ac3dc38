"""Output of `preflight`: plain lines for a terminal or an init container's log (the verdict,
then one line per failed check with what to do, the warnings, the checks that passed, the host
facts used), and markdown for a ticket. Plain text on purpose: no terminal library to import on
every pod start, and logs read the same in `kubectl logs` as on a terminal."""

from __future__ import annotations

from vllm_triage.preflight.models import PreflightCheck, PreflightResult

_MARK = {"error": "FAIL", "warning": "WARN"}


def _headline(result: PreflightResult) -> str:
    failed, warnings = len(result.failed), len(result.warnings)
    counts = f"{len(result.checks)} checks, {failed} failed, {warnings} warning(s)"
    return f"{'GO' if result.go else 'NO-GO'}  ({counts})"


def _check_line(check: PreflightCheck) -> str:
    mark = "ok  " if check.ok else _MARK[check.severity]
    line = f"{mark} {check.id}: {check.message}"
    if not check.ok and check.fix:
        line += f" -> {check.fix}"
    return line


def _ordered(result: PreflightResult) -> list[PreflightCheck]:
    return [*result.failed, *result.warnings, *(c for c in result.checks if c.ok)]


def _host_line(result: PreflightResult) -> str:
    h = result.host
    parts = []
    if h.driver:
        parts.append(f"driver {h.driver} ({h.driver_from})")
    if h.gpu:
        count = f"{h.gpu_count}x " if h.gpu_count else ""
        parts.append(f"{count}{h.gpu} ({h.gpu_from})")
    if h.shm_bytes is not None:
        parts.append(f"/dev/shm {_size(h.shm_bytes)} ({h.shm_from})")
    if h.image_cuda:
        parts.append(f"image {h.image or ''} CUDA {h.image_cuda}".replace("  ", " "))
    if h.recipe:
        parts.append(f"recipe {h.recipe} profile {h.profile}")
    if h.container_user:
        parts.append(f"user {h.container_user}")
    return "host: " + "; ".join(parts) if parts else "host: nothing known"


def _size(value: int) -> str:
    if value >= 1024**3:
        return f"{value / 1024**3:,.1f} GiB"
    return f"{value / 1024**2:,.0f} MiB"


def preflight_text(result: PreflightResult) -> str:
    """The verdict first, then each check on one line (failures first), then the facts used."""
    lines = [_headline(result)]
    lines += [_check_line(check) for check in _ordered(result)]
    lines.append(_host_line(result))
    return "\n".join(lines) + "\n"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|")


def preflight_markdown(result: PreflightResult) -> str:
    """The same for a ticket: a heading, a table of the checks, the host facts."""
    lines = [
        f"## Preflight: {'go' if result.go else 'no-go'}",
        "",
        "| check | result | what was found | what to do |",
        "|---|---|---|---|",
    ]
    for check in _ordered(result):
        state = "ok" if check.ok else _MARK[check.severity].lower()
        lines.append(
            f"| {_cell(check.id)} | {state} | {_cell(check.message)} | "
            f"{_cell(check.fix if not check.ok else '')} |"
        )
    lines += ["", _cell(_host_line(result)), ""]
    return "\n".join(lines)
