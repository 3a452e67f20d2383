"""The ledger of the bytes-balance greedy (`planning.placement.bytes_moves`): every broker's bytes
and replicas, and its movable replicas sorted by size, kept move by move.

A move (`move`; a swap is two) updates the two brokers it touches, the sums per closed rack group
the lower bound reads (`bound`, `count_bound`), and the sorted size lists (a bisect and one list
insertion per replica moved); `evaluate` prices a candidate move in O(1) from those sums. Nothing
here walks the partitions after the ledger is built. The class docstring states its invariant.

Pure: the plan's scratch, deterministic.
"""

from __future__ import annotations

import bisect

from planning.placement.bytes_model import BalanceModel


class Ledger:
    """Per broker bytes and replicas, per closed group the sums the bound reads, updated move by
    move; and per broker its movable replicas sorted by size.

    INVARIANT. `items[b]` is the sorted list of `(size, partition index)` of b's movable replicas
    and `sizes[b]` its sizes alone, position for position: searches bisect the plain integers
    (a tuple comparison per probe costs several times more, and the balance loop makes about
    sixteen searches per move). `band[b]` is `(bhi, blo, chi, clo, group)`, read together on
    every evaluation."""

    def __init__(self, model: BalanceModel, load: dict[int, int], count: dict[int, int]) -> None:
        self.m = model
        self.load, self.count = load, count
        n = max(1, len(model.brokers))
        self.bunit = max(1, sum(model.byte_share.values()) // n if model.brokers else 1)
        self.cunit = max(1, sum(model.count_share.values()) // n if model.brokers else 1)
        self.reband()
        # One sort of the movable partitions by (size, index), then each replica appended to its
        # broker's list in that order: every list comes out sorted (a sort per broker of tuples
        # cost several seconds at 300k partitions).
        parts = model.parts
        # (A stable sort by size of indices in ascending order: ties stay in index order.)
        order = sorted((i for i, part in enumerate(parts) if part.movable), key=lambda i: parts[i].size)
        self.items: dict[int, list[tuple[int, int]]] = {b: [] for b in model.brokers}
        self.sizes: dict[int, list[int]] = {b: [] for b in model.brokers}
        items, sizes = self.items, self.sizes
        for index in order:
            part = parts[index]
            size = part.size
            item = (size, index)
            for b in part.members:
                items[b].append(item)
                sizes[b].append(size)

    def reband(self) -> None:
        """The per-group sums the bound reads and `band`, from the model's bands as they are now
        (at the start, and when the model's disk bands change: `BalanceModel.restore_bands`)."""
        model, load, count = self.m, self.load, self.count
        self.g_held = {g: 0 for g in model.group_members}
        self.g_exc = dict.fromkeys(model.group_members, 0)
        self.g_def = dict.fromkeys(model.group_members, 0)
        self.gc_held = dict.fromkeys(model.group_members, 0)
        self.gc_exc = dict.fromkeys(model.group_members, 0)
        self.gc_def = dict.fromkeys(model.group_members, 0)
        for b in model.brokers:
            g = model.group[b]
            self.g_held[g] += load[b]
            self.g_exc[g] += max(0, load[b] - model.bhi[b])
            self.g_def[g] += max(0, model.blo[b] - load[b])
            self.gc_held[g] += count[b]
            self.gc_exc[g] += max(0, count[b] - model.chi[b])
            self.gc_def[g] += max(0, model.clo[b] - count[b])
        self.lb_total = self.bound()
        self.cb_total = self.count_bound()
        self.band = {b: (model.bhi[b], model.blo[b], model.chi[b], model.clo[b], model.group[b])
                     for b in model.brokers}

    def take_item(self, b: int, size: int, index: int) -> None:
        values = self.items[b]
        position = bisect.bisect_left(values, (size, index))
        del values[position]
        del self.sizes[b][position]

    def put_item(self, b: int, size: int, index: int) -> None:
        values = self.items[b]
        position = bisect.bisect_right(values, (size, index))
        values.insert(position, (size, index))
        self.sizes[b].insert(position, size)

    def _group_bound(self, g: int, held: int, exc: int, deficit: int) -> int:
        return max(deficit, exc + self.m.group_bytes[g] - held)

    def _group_count_bound(self, g: int, held: int, exc: int, deficit: int) -> int:
        return max(deficit, exc + self.m.group_count[g] - held)

    def violation(self, b: int, load: int, count: int) -> int:
        m = self.m
        bytes_out = max(0, load - m.bhi[b]) + max(0, m.blo[b] - load)
        count_out = max(0, count - m.chi[b]) + max(0, m.clo[b] - count)
        return bytes_out * self.cunit + count_out * self.bunit

    def relative_violation(self, b: int) -> float:
        m = self.m
        load, count = self.load[b], self.count[b]
        bytes_out = max(0, load - m.bhi[b]) + max(0, m.blo[b] - load)
        count_out = max(0, count - m.chi[b]) + max(0, m.clo[b] - count)
        return max(bytes_out / max(1, m.bshare_floor[b]), count_out / max(1, m.cshare_floor[b]))

    def evaluate(self, s: int | None, d: int | None, x: int) -> tuple[int, int, int, int]:
        """For `x` bytes (one replica) moving from s to d (None: from outside or to outside the
        tree): (bytes bound after plus the bytes it traps, replica bound after, change of s's
        violation, of d's). Trapped: bytes a broker must still shed (receive) when it has no
        replica left to give (no room to take one): only a swap can fix them, which moves at
        least as much again."""
        m = self.m
        changes: dict[int, list[int]] = {}
        deltas = [0, 0]
        trap = 0
        cunit, bunit = self.cunit, self.bunit
        for side, b, sign in ((0, s, -1), (1, d, 1)):
            if b is None:
                continue
            l0, c0 = self.load[b], self.count[b]
            l1, c1 = l0 + sign * x, c0 + sign
            hi, lo, chi, clo, g = self.band[b]
            e0 = l0 - hi if l0 > hi else 0
            e1 = l1 - hi if l1 > hi else 0
            f0 = lo - l0 if l0 < lo else 0
            f1 = lo - l1 if l1 < lo else 0
            ce0 = c0 - chi if c0 > chi else 0
            ce1 = c1 - chi if c1 > chi else 0
            cf0 = clo - c0 if c0 < clo else 0
            cf1 = clo - c1 if c1 < clo else 0
            change = changes.get(g)
            if change is None:
                changes[g] = [sign * x, e1 - e0, f1 - f0, sign, ce1 - ce0, cf1 - cf0]
            else:
                change[0] += sign * x
                change[1] += e1 - e0
                change[2] += f1 - f0
                change[3] += sign
                change[4] += ce1 - ce0
                change[5] += cf1 - cf0
            deltas[side] = (e1 + f1 - e0 - f0) * cunit + (ce1 + cf1 - ce0 - cf0) * bunit
            if e1 and c1 <= clo:
                trap += e1
            elif f1 and c1 >= chi:
                trap += f1
            if e0 and c0 <= clo:
                trap -= e0
            elif f0 and c0 >= chi:
                trap -= f0
        lb = self.lb_total + trap
        cb = self.cb_total
        for g, (dh, de, dd, dch, dce, dcd) in changes.items():
            held, exc, deficit, target = self.g_held[g], self.g_exc[g], self.g_def[g], m.group_bytes[g]
            lb += max(deficit + dd, exc + de + target - held - dh) - max(deficit, exc + target - held)
            held, exc, deficit, target = self.gc_held[g], self.gc_exc[g], self.gc_def[g], m.group_count[g]
            cb += max(deficit + dcd, exc + dce + target - held - dch) - max(deficit, exc + target - held)
        return lb, cb, deltas[0], deltas[1]

    def bound(self) -> int:
        return sum(self._group_bound(g, self.g_held[g], self.g_exc[g], self.g_def[g]) for g in self.g_held)

    def count_bound(self) -> int:
        return sum(self._group_count_bound(g, self.gc_held[g], self.gc_exc[g], self.gc_def[g]) for g in self.g_held)

    def shift(self, b: int, x: int, sign: int) -> None:
        m = self.m
        g = m.group[b]
        l0, c0 = self.load[b], self.count[b]
        l1, c1 = l0 + sign * x, c0 + sign
        self.lb_total -= self._group_bound(g, self.g_held[g], self.g_exc[g], self.g_def[g])
        self.cb_total -= self._group_count_bound(g, self.gc_held[g], self.gc_exc[g], self.gc_def[g])
        self.g_held[g] += sign * x
        self.g_exc[g] += max(0, l1 - m.bhi[b]) - max(0, l0 - m.bhi[b])
        self.g_def[g] += max(0, m.blo[b] - l1) - max(0, m.blo[b] - l0)
        self.gc_held[g] += sign
        self.gc_exc[g] += max(0, c1 - m.chi[b]) - max(0, c0 - m.chi[b])
        self.gc_def[g] += max(0, m.clo[b] - c1) - max(0, m.clo[b] - c0)
        self.lb_total += self._group_bound(g, self.g_held[g], self.g_exc[g], self.g_def[g])
        self.cb_total += self._group_count_bound(g, self.gc_held[g], self.gc_exc[g], self.gc_def[g])
        self.load[b], self.count[b] = l1, c1

    def release(self, index: int, b: int) -> None:
        """Partition `index`'s replica on b leaves it: its slot opens (None) and b's figures drop."""
        m = self.m
        part = m.parts[index]
        part.final[part.final.index(b)] = None
        part.members.discard(b)
        part.changed()
        self.shift(b, part.size, -1)
        m.topic_count[(part.topic, b)] -= 1
        if part.movable:
            self.take_item(b, part.size, index)

    def move(self, index: int, s: int | None, d: int) -> None:
        """Apply: partition `index`'s replica on s (None: an open slot) goes to d."""
        m = self.m
        part = m.parts[index]
        position = part.final.index(s)
        if s is not None:
            self.release(index, s)
        part.final[position] = d
        part.members.add(d)
        part.changed()
        self.shift(d, part.size, 1)
        m.topic_count[(part.topic, d)] = m.topic_count.get((part.topic, d), 0) + 1
        if part.movable:
            self.put_item(d, part.size, index)


# --- 1. forced moves -------------------------------------------------------------------------------
