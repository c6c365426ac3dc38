"""Log signatures compiled for matching: which rules a normalised line fires, and what it says."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vllm_triage.diagnose.logreader import LogLine
from vllm_triage.knowledge.schema import Milestone, Signature

# Lines logged at these levels are progress reports; an error phrase inside one is not an error.
_QUIET_LEVELS = {"DEBUG", "INFO"}


@dataclass(frozen=True)
class CompiledSignature:
    signature: Signature
    regex: re.Pattern[str]
    extractors: dict[str, re.Pattern[str]]

    @classmethod
    def of(cls, signature: Signature) -> CompiledSignature:
        return cls(
            signature,
            re.compile("|".join(f"(?:{p})" for p in signature.patterns)),
            {name: re.compile(p) for name, p in signature.extract.items()},
        )

    def counts_at(self, line: LogLine) -> bool:
        """Whether a match on this line is evidence (a stall is read from progress lines too)."""
        return self.signature.tier == "stall" or line.level not in _QUIET_LEVELS

    def extract(self, line: LogLine) -> dict[str, str]:
        found = {}
        for name, regex in self.extractors.items():
            if match := regex.search(line.message):
                found[name] = match.group(1)
        return found


@dataclass(frozen=True)
class CompiledMilestone:
    milestone: Milestone
    rank: int
    regex: re.Pattern[str]

    @classmethod
    def of(cls, milestone: Milestone, rank: int) -> CompiledMilestone:
        return cls(milestone, rank, re.compile("|".join(f"(?:{p})" for p in milestone.patterns)))

    def seen_in(self, line: LogLine) -> bool:
        return self.regex.search(line.message) is not None
