"""MirrorMaker 2 semantics: flows (KIP-1144), internal topics and their records, offset translation."""
