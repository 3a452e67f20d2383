"""A persistent sorted sequence: `SortedChunks`, sorted distinct items in tuples of at most
`CHUNK` items. Inserting or removing one item copies one chunk and the tuple of chunks —
O(CHUNK + n / CHUNK) — and leaves the old sequence as it was, so that a value holding one
(`planning.movement.advance.SteppingMemo`) stays immutable and can be used again, without the
O(n) copy a plain sorted tuple costs per change (a big rebalance has 125k waiting
candidates and a few changes per decision).

Invariants: every chunk is non-empty and sorted, each chunk's items sort before the next
chunk's, no item twice; `_lasts[i]` is `_chunks[i][-1]`.

Example (CHUNK = 2, a chunk splits beyond 2 x CHUNK items): from (1, 3, 5) → chunks ((1, 3),
(5,)); insert 4 → ((1, 3), (4, 5)); insert 2 → ((1, 2, 3), (4, 5)); remove 4, 5 → ((1, 2, 3),).
"""

from __future__ import annotations

import bisect
from typing import Iterable, Iterator

CHUNK = 512


class SortedChunks:
    __slots__ = ("_chunks", "_lasts", "_len")

    def __init__(self, ordered: Iterable = (), *, _chunks: tuple = None, _length: int = 0) -> None:
        """`ordered`: items already sorted and distinct (not checked)."""
        if _chunks is None:
            items = tuple(ordered)
            _chunks = tuple(items[i:i + CHUNK] for i in range(0, len(items), CHUNK))
            _length = len(items)
        self._chunks = _chunks
        self._lasts = tuple(c[-1] for c in _chunks)
        self._len = _length

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator:
        for chunk in self._chunks:
            yield from chunk

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SortedChunks) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SortedChunks({list(self)!r})"

    def insert(self, item) -> "SortedChunks":
        """A sequence with `item` (not in this one) in its place."""
        if not self._chunks:
            return SortedChunks(_chunks=((item,),), _length=1)
        i = min(bisect.bisect_left(self._lasts, item), len(self._chunks) - 1)
        chunk = list(self._chunks[i])
        bisect.insort(chunk, item)
        if len(chunk) > 2 * CHUNK:
            middle = len(chunk) // 2
            replacement = (tuple(chunk[:middle]), tuple(chunk[middle:]))
        else:
            replacement = (tuple(chunk),)
        return SortedChunks(_chunks=self._chunks[:i] + replacement + self._chunks[i + 1:], _length=self._len + 1)

    def remove(self, item) -> "SortedChunks | None":
        """A sequence without `item`; None when `item` is not in this one."""
        i = bisect.bisect_left(self._lasts, item)
        if i == len(self._chunks):
            return None
        chunk = self._chunks[i]
        j = bisect.bisect_left(chunk, item)
        if j == len(chunk) or chunk[j] != item:
            return None
        smaller = chunk[:j] + chunk[j + 1:]
        replacement = (smaller,) if smaller else ()
        return SortedChunks(_chunks=self._chunks[:i] + replacement + self._chunks[i + 1:], _length=self._len - 1)
