"""A scan as `fleet scan` keeps it: the artifact's header (image, waves, counts, notes) and one
NodeRecord per node, written out as the same JSON as the FleetScan model writes, node by node,
so that a million nodes never exist as models or as one string."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

import orjson

from vllm_triage.fleet.models import FleetNode, FleetScan, NodeRecord, NodeView

_CHUNK_NODES = 4096
# How FleetScan.model_dump_json(indent=2) writes an empty node list, and how orjson writes a
# {"nodes": [...]} document at the same indentation (the nodes are one level deeper in both).
_EMPTY_NODES = '\n  "nodes": [],\n'
_OPEN = b'{\n  "nodes": [\n'
_CLOSE = b"\n  ]\n}"


@dataclass(frozen=True)
class ScannedFleet:
    """The scan's header (a FleetScan without nodes, stamped) and its nodes as records."""

    header: FleetScan
    records: list[NodeRecord]

    @property
    def image(self) -> str | None:
        return self.header.image

    @property
    def image_pinned(self) -> str | None:
        return self.header.image_pinned

    @property
    def cuda(self) -> str:
        return self.header.cuda

    @property
    def cuda_source(self) -> str:
        return self.header.cuda_source

    @property
    def source(self) -> str:
        return self.header.source

    @property
    def min_driver(self) -> str | None:
        return self.header.min_driver

    @property
    def toolkit_driver(self) -> str | None:
        return self.header.toolkit_driver

    @property
    def recommended_driver(self) -> str | None:
        return self.header.recommended_driver

    @property
    def recommended_branch(self) -> str | None:
        return self.header.recommended_branch

    @property
    def nodes(self) -> Sequence[NodeView]:
        return self.records

    @property
    def waves(self) -> list[list[str]]:
        return self.header.waves

    @property
    def wave_size(self) -> int:
        return self.header.wave_size

    @property
    def counts(self) -> dict[str, int]:
        return self.header.counts

    @property
    def notes(self) -> list[str]:
        return self.header.notes

    def artifact(self) -> FleetScan:
        """The whole artifact as a model (every node validated): for a library caller."""
        nodes = [FleetNode.model_validate(record.as_dict()) for record in self.records]
        return self.header.model_copy(update={"nodes": nodes})

    def json_chunks(self) -> Iterator[bytes]:
        """The artifact's JSON, as `model_dump_json(indent=2)` and a newline would write it,
        in pieces of a few thousand nodes."""
        text = self.header.model_dump_json(indent=2)
        if not self.records:
            yield (text + "\n").encode()
            return
        before, after = text.split(_EMPTY_NODES)
        yield (before + '\n  "nodes": [\n').encode()
        for start in range(0, len(self.records), _CHUNK_NODES):
            chunk = self.records[start : start + _CHUNK_NODES]
            body = orjson.dumps({"nodes": chunk}, option=orjson.OPT_INDENT_2)
            yield (b",\n" if start else b"") + body[len(_OPEN) : -len(_CLOSE)]
        yield ("\n  ],\n" + after + "\n").encode()

    def write_json(self, stream: IO[bytes]) -> None:
        """The artifact's JSON into a binary stream."""
        for chunk in self.json_chunks():
            stream.write(chunk)
