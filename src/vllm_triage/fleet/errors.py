"""The fleet package's input error: a node list, pod list, inventory or option it cannot use."""

from vllm_triage.errors import InputError


class FleetInputError(InputError):
    """A node list, pod list or inventory the fleet commands cannot use; one line naming it."""
