"""Diagnosis: the version-threshold verdict and the log analysis behind `compat` and `diagnose`."""

from vllm_triage.diagnose.api import compat, diagnose

__all__ = ["compat", "diagnose"]
