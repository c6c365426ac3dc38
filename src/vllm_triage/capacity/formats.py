"""Bytes per weight and per KV-cache entry: the dtype and quantisation table (formats.yaml) read
and validated once, and the lookups capacity makes in it.

The table is data with a source, a date and a certainty like the knowledge base's files; it lives
beside the code that multiplies with it because nothing else in the tool reads it.
"""

from __future__ import annotations

import re
from datetime import date
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vllm_triage.errors import KnowledgeError
from vllm_triage.knowledge.schema import Certainty

FORMATS_FILE = Path(__file__).with_name("formats.yaml")

Part = Literal["attention", "mlp", "experts", "shared"]
"""The parts of a decoder layer a quantisation method can cover (capacity.shapes.Params)."""


class QuantFormat(BaseModel):
    """One quantisation method: how many bits a quantised weight takes, with its scales."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str
    aliases: list[str] = Field(default_factory=list)
    bits: float = Field(gt=0, le=32)
    group_size: int = Field(gt=0)
    scale_bits: int = Field(ge=0, le=64)
    zero_point: bool = False
    applies_to: list[Part]
    bits_keys: list[str] = Field(default_factory=list)
    group_keys: list[str] = Field(default_factory=list)
    by_algo: dict[str, str] = Field(default_factory=dict)
    algo_keys: list[str] = Field(default_factory=list)
    pad_hidden: int = Field(default=1, gt=0, description="experts' hidden size rounded up to it")
    pad_intermediate: int = Field(
        default=1, gt=0, description="experts' intermediate size rounded up to it"
    )
    pad_source: str = ""
    source: str = Field(min_length=3)
    certainty: Certainty

    def bits_per_weight(self, bits: float | None = None, group_size: int | None = None) -> float:
        """Bits a quantised weight takes in memory, its share of the group's scale (and zero
        point) included; `bits` and `group_size` override the method's defaults."""
        weight_bits = self.bits if bits is None else bits
        group = self.group_size if group_size is None else group_size
        extra = self.scale_bits + (weight_bits if self.zero_point else 0)
        return weight_bits + extra / group

    def expert_padding(self, hidden: int, width: int) -> float:
        """How much larger the experts' weights are in memory than in the checkpoint, where vLLM's
        kernels for this format pad their dimensions."""
        padded = round_up(hidden, self.pad_hidden) * round_up(width, self.pad_intermediate)
        return padded / (hidden * width)


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class Exclusion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    part: Part


class Provenance(BaseModel):
    """Source, date and certainty of the table, as the knowledge files state theirs (the table
    is validated here with pydantic; the knowledge base's classes are msgspec Structs)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    as_of: date
    source_note: str = ""
    certainty: Certainty


class Formats(Provenance):
    """formats.yaml: dtypes, KV-cache dtypes, quantisation methods and exclusion patterns."""

    dtypes: dict[str, int]
    kv_cache_dtypes: dict[str, int | None]
    mla_fp8_ds_bytes_per_token_per_layer: int = Field(gt=0)
    mla_fp8_ds_source: str
    quantization: list[QuantFormat]
    exclusions: list[Exclusion]

    def quant(self, name: str) -> QuantFormat | None:
        """The method a quant_method or --quantization value names (aliases included)."""
        key = name.strip().lower()
        for entry in self.quantization:
            if key == entry.method or key in entry.aliases:
                return entry
        return None

    def excluded_part(self, entry: str) -> Part | None:
        """The layer part an entry of a checkpoint's exclusion list keeps unquantised."""
        for exclusion in self.exclusions:
            if re.search(exclusion.pattern, entry, re.IGNORECASE):
                return exclusion.part
        return None


@cache
def load_formats() -> Formats:
    """The validated table; KnowledgeError (one line, exit 3) if the packaged file is broken."""
    import yaml

    try:
        document = yaml.safe_load(FORMATS_FILE.read_text(encoding="utf-8"))
        return Formats.model_validate(document)
    except (OSError, yaml.YAMLError) as exc:
        raise KnowledgeError(f"{FORMATS_FILE.name}: cannot be read ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise KnowledgeError(f"{FORMATS_FILE.name}: {where}: {first['msg']}") from None
