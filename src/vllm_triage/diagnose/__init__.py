"""Diagnosis: the version-threshold verdict and the log analysis behind `compat` and `diagnose`."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.diagnose.api import CompatOptions, DiagnoseOptions, compat, diagnose

__all__ = ["CompatOptions", "DiagnoseOptions", "compat", "diagnose"]
__getattr__ = lazy_exports(__name__, {name: "vllm_triage.diagnose.api" for name in __all__})
