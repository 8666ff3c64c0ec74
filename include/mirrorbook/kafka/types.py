"""Small value types shared by the Kafka and MM2 layers."""

from __future__ import annotations

from typing import NamedTuple


class TP(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> "TP":
        topic, _, part = text.rpartition("-")
        return cls(topic, int(part))
