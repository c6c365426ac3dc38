"""vllm-triage: triage vLLM bring-up failures on shared GPU clusters."""

from vllm_triage.diagnose import compat, diagnose

__version__ = "0.1.0"

__all__ = ["__version__", "compat", "diagnose"]
