"""Diagnosis: the version-threshold verdict and the log analysis behind `compat` and `diagnose`."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.diagnose.api import compat, diagnose

__all__ = ["compat", "diagnose"]
__getattr__ = lazy_exports(
    __name__, {"compat": "vllm_triage.diagnose.api", "diagnose": "vllm_triage.diagnose.api"}
)
