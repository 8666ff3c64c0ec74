"""A number of records that is either known exactly or bounded — never a bare "0" for what was not counted.

Moving a consumer group to another cluster re-reads some records and must skip none. Where mirrorbook
can count them (both sides read, the group's next record matched by content) the count is exact; where
it cannot (the source is gone, the window was not read), it is a bound derived from what is known —
MM2's offset-syncs, the target's offsets — and says so. Sums of counts stay honest: a total of exact
and bounded counts is bounded.
"""

from __future__ import annotations

from typing import Iterable

from pydantic import BaseModel, ConfigDict


class Count(BaseModel):
    """low <= n <= high; `high` None: no upper bound known. Exact when low == high."""

    model_config = ConfigDict(frozen=True)
    low: int = 0
    high: int | None = 0

    @classmethod
    def exact(cls, n: int) -> "Count":
        return cls.between(n, n)

    @classmethod
    def between(cls, low: int, high: int | None) -> "Count":
        low = max(0, low)
        return cls.kept(low, None if high is None else max(low, high))

    @classmethod
    def kept(cls, low: int, high: int | None) -> "Count":
        """Count(low=low, high=high). Counts are immutable and a translation makes the same few over and over (one
        per position counted, a hundred thousand for a large estate): each is made once."""
        made = _MADE.get((low, high)) if cls is Count else None
        if made is None:
            made = cls(low=low, high=high)
            if cls is Count and len(_MADE) < _MADE_MAX:
                _MADE[(low, high)] = made
        return made

    @property
    def is_exact(self) -> bool:
        return self.high == self.low

    @property
    def value(self) -> int | None:
        """The count when it is exact, else None."""
        return self.low if self.is_exact else None

    @property
    def may_be_positive(self) -> bool:
        return self.high is None or self.high > 0

    def __add__(self, other: "Count") -> "Count":
        high = None if self.high is None or other.high is None else self.high + other.high
        return Count(low=self.low + other.low, high=high)

    def __str__(self) -> str:
        if self.is_exact:
            return f"{self.low}"
        if self.high is None:  # "at least 0" would read as a count: nothing bounds it
            return f"at least {self.low}" if self.low else "unknown (not counted)"
        return f"{self.low}–{self.high}" if self.low else f"at most {self.high}"


_MADE: dict[tuple[int, int | None], Count] = {}
_MADE_MAX = 100_000


def total(counts: Iterable[Count]) -> Count:
    low = 0
    high: int | None = 0  # None once a count is unbounded
    for c in counts:  # in plain ints: a sum over a hundred thousand rows makes one Count, not one per row
        low += c.low
        high = None if high is None or c.high is None else high + c.high
    return Count(low=low, high=high)


ZERO = Count.exact(0)
