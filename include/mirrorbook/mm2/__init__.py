"""MirrorMaker 2 semantics: flows (KIP-1144), internal topics and their records, offset translation."""

from typing import Literal

# How a group's offsets are translated to the target: MM2's own checkpoints (one pass for all groups), or
# `precise` — the exact next record, proven against both clusters (mm2/precise.py).
Translation = Literal["precise", "mm2"]
