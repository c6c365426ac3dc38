"""vllm-triage: triage vLLM bring-up failures on shared GPU clusters.

The library lives in the subpackages, one per step: `vllm_triage.diagnose.compat()` and
`vllm_triage.diagnose.diagnose()` are what the `compat` and `diagnose` commands call.
"""

__version__ = "0.1.0"
