"""Checks that runs (output folders of `tetra train`) trained the same: the
losses in their metrics.jsonl and the tensors of their last checkpoint, byte
for byte (the header's metadata, which names the run, may differ)."""
import json
import struct
import sys
from pathlib import Path


def losses(run):
    return [r["loss"] for r in map(json.loads, open(run / "metrics.jsonl"))
            if "loss" in r]


def tensors(run):
    path = sorted((run / "checkpoints").glob("step_*.safetensors"))[-1]
    data = path.read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__", None)
    return header, data[8 + size:]


runs = [Path(p) for p in sys.argv[1:]]
first_losses, (first_header, first_bytes) = losses(runs[0]), tensors(runs[0])
for run in runs[1:]:
    if losses(run) != first_losses:
        sys.exit(f"{run}: losses {losses(run)} != {first_losses}")
    header, data = tensors(run)
    if header != first_header or data != first_bytes:
        sys.exit(f"{run}: checkpoint tensors differ from {runs[0]}'s")
print(f"{len(first_losses)} losses and {len(first_header)} checkpoint "
      f"tensors' bytes the same in {len(runs)} runs")
