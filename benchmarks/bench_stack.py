"""A devstack of the benchmark's own, in a fresh directory, purged when the benchmark ends."""

from __future__ import annotations

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from mirrorbook.devstack.stack import DevStack


@contextmanager
def throwaway_stack(prefix: str, secure: bool = False, **mm2: int) -> Iterator[tuple[Path, DevStack]]:
    """Yields (work dir, running stack); `mm2` overrides Mm2Settings (e.g. checkpoint_interval_s=2); `secure`
    starts it as `devstack up --secure` does."""
    from mirrorbook.devstack.config import Mm2Settings, StackSettings
    from mirrorbook.devstack.stack import DevStack

    work = Path(tempfile.mkdtemp(prefix=prefix))
    stack = DevStack(work / "stack")
    try:
        t0 = time.monotonic()
        stack.up(StackSettings(mm2=Mm2Settings(**mm2), secure=secure))
        print(f"{'secured ' if secure else ''}devstack up in {time.monotonic() - t0:.1f}s ({work})")
        yield work, stack
    finally:
        stack.down(purge=True)
