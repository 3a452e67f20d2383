"""Bytes in and network out within their bands, once disk bytes and replicas are placed
(`planning.placement.bytes_balance`, steps 2b and 4b).

TRAFFIC (`planning.load`): every replica of a partition carries its bytes in; its leader also
carries its network out, (replicas - 1) × bytes in + bytes out. Traffic never measured counts as
zero: with no traffic known neither step changes anything.

BANDS. A broker's share of bytes in follows the rack rule as its share of disk bytes does (a
closed rack group holds a fixed number of replicas of every partition); its share of network out
is even over the eligible brokers (any replica may lead). Within tolerance t means
`(1 - t) × share <= value <= (1 + t) × share` (`Tolerances.bytes_in`, `Tolerances.network_out`).

2b. BYTES IN, by replicas. While some broker is outside its band, the one furthest out (relative
to its share) gets the change that moves the fewest bytes per unit of violation it removes. The
violation sums, over the brokers a change touches, how far each is outside its disk-bytes,
replica-count and bytes-in bands, each relative to its share; a change that leaves the disk or
count bands further off is never made (disk and replicas come first). A change is a move of one of its replicas to a peer of its closed rack group (or of
a peer's to it), or a swap of one of its busiest replicas with a quieter one of about the same
size on a peer (both counts unchanged, the disk bytes nearly). The hard rules hold as everywhere:
the rack rule (`BalanceModel.fits`) and the per-topic limits (`BalanceModel.may_take`). Stops
when every broker is within its bands or nothing helps (and after a budget of steps).

4b. NETWORK OUT, by leadership only (no data moves). While some broker is outside its band, the
one furthest out hands the leadership of one of its partitions to a follower (or takes it from a
partition it follows), or two leaderships trade places when a leader count is at the edge of its
band (the one given back: among the taker's quietest leaderships, the first few the giver
follows; a pair of brokers shares few partitions, so the quietest dozen alone rarely holds one):
the change that removes the most violation over network out and leader counts, never
leaving a leader count further outside its band, then the one that changes fewest leaders from
before (giving a partition its old leader back is best).

COST (300k partitions). 2b reads the greedy's ledger (shared, `bytes_balance`), sorts a broker's
busiest replicas only when a step first reads them, and passes over a change whose bytes alone,
over all the violation its pair has, lose to the best so far; 4b reads the partitions a broker
follows only while it is below its band. None of it changes a choice: the same plans.

Pure: works on the plan's scratch (`Part`s, a `Ledger`), deterministic (ties by ids).
"""

from __future__ import annotations

import bisect
import heapq
import math
from fractions import Fraction

from planning.placement.bytes_ledger import Ledger
from planning.placement.bytes_model import BalanceModel, as_fraction
from planning.placement.bytes_moves import furthest_out
from planning.placement.quotas import compute_ideal_shares

_PEERS = 8  # peers looked at for a change, the most useful first
_CANDIDATES = 12  # a broker's busiest replicas (leaderships) tried
_BACK_SCAN = 96  # a taker's quietest leaderships read for one to give back in a trade
_SCAN = 8  # replicas of about the same size looked at either side, for a swap
_EPSILON = 1e-12


def compute_rates(model: BalanceModel) -> tuple[list[int], list[int]]:
    """Bytes in and bytes out per second of each of the plan's partitions (unknown: 0)."""
    return ([int(round(part.state.bytes_in_per_sec or 0)) for part in model.parts],
            [int(round(part.state.bytes_out_per_sec or 0)) for part in model.parts])


def outside_band(value: int, low: int, high: int) -> int:
    """How far `value` is outside [low, high] (0 inside)."""
    return value - high if value > high else low - value if value < low else 0


def compute_leader_loads(model: BalanceModel, rates_in: list[int], rates_out: list[int]) -> list[int]:
    """What each part's leader sends per second (module TRAFFIC): (replicas - 1) x bytes in +
    bytes out."""
    return [max(0, len(part.final) - 1) * rate_in + rate_out
            for part, rate_in, rate_out in zip(model.parts, rates_in, rates_out)]


def compute_bytes_in_bands(model: BalanceModel, rates: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    """(low, high) bytes in per eligible broker (module BANDS)."""
    histogram: dict[int, int] = {}
    for part, rate in zip(model.parts, rates):
        if part.replication > 0 and rate:
            histogram[part.replication] = histogram.get(part.replication, 0) + rate
    shares = compute_ideal_shares(model.tree, histogram) if histogram else {b: Fraction(0) for b in model.brokers}
    t = as_fraction(model.tolerances.bytes_in)
    return ({b: math.ceil((1 - t) * s) for b, s in shares.items()},
            {b: math.floor((1 + t) * s) for b, s in shares.items()})


def compute_even_bands(total: int, brokers, tolerance: float) -> tuple[dict[int, int], dict[int, int]]:
    """(low, high) around an even share of `total` (leaders, network out)."""
    share = Fraction(total, max(1, len(brokers)))
    t = as_fraction(tolerance)
    return ({b: math.floor((1 - t) * share) for b in brokers}, {b: math.ceil((1 + t) * share) for b in brokers})


# --- 2b. bytes in ------------------------------------------------------------------------------


class BytesIn:
    """Bytes in per broker, its bands, and each broker's movable replicas by rate, kept move by
    move (`move` moves the replica on the ledger too): step 2b's state, and 2c's bytes-in check."""

    def __init__(self, model: BalanceModel, ledger: Ledger, rates: list[int]) -> None:
        self.m, self.ledger, self.rate = model, ledger, rates
        self.low, self.high = compute_bytes_in_bands(model, rates)
        self.unit = {b: max(1, (self.low[b] + self.high[b]) // 2) for b in model.brokers}
        self.load = dict.fromkeys(model.brokers, 0)
        self.items: dict[int, list[tuple[int, int]]] = {}  # `busiest`, built when first asked for
        parts, load = model.parts, self.load
        for index, rate in enumerate(rates):
            if rate:  # a quiet replica adds nothing to a load
                for b in parts[index].members:
                    load[b] += rate

    def busiest(self, b: int) -> list[tuple[int, int]]:
        """b's movable replicas with traffic by (rate, index), the busiest last. Sorted when first
        asked for (a step reads a few brokers' lists; sorting all 900k replicas up front cost
        more than the greedy) from the ledger's, which hold b's movable replicas as they stand;
        kept move by move after that (`move`), so the list is the one a sort would give now."""
        values = self.items.get(b)
        if values is None:
            rates = self.rate
            get = rates.__getitem__
            indices = sorted(index for _, index in self.ledger.items[b] if rates[index])
            # By rate alone after ascending ids (a stable sort: ties stay in id order), i.e. by
            # (rate, index): sorting integers by key costs half what sorting the tuples does.
            # Quiet replicas are left out: a change never starts from one.
            indices.sort(key=get)
            values = self.items[b] = [(rates[index], index) for index in indices]
        return values

    def relative(self, b: int) -> float:
        return outside_band(self.load[b], self.low[b], self.high[b]) / self.unit[b]

    def violation(self, b: int, disk: int, count: int, rate: int) -> tuple[float, float]:
        """(disk and count violation, bytes-in violation) of b, each relative to its share."""
        m = self.m
        return (outside_band(disk, m.blo[b], m.bhi[b]) / max(1, m.bshare_floor[b])
                + outside_band(count, m.clo[b], m.chi[b]) / max(1, m.cshare_floor[b]),
                outside_band(rate, self.low[b], self.high[b]) / self.unit[b])

    def pair(self, giver: int, taker: int) -> tuple[float, float, float, float]:
        """The violations of giver and taker as they stand (`violation`), read once per pair:
        every change `_best_in_change` prices moves between one giver and one taker."""
        ledger = self.ledger
        return (*self.violation(giver, ledger.load[giver], ledger.count[giver], self.load[giver]),
                *self.violation(taker, ledger.load[taker], ledger.count[taker], self.load[taker]))

    def gain(self, giver: int, taker: int, base, size: int, count: int, rate: int) -> float:
        """How much violation a change removes that takes `size` bytes, `count` replicas and
        `rate` bytes in from giver to taker (a swap: the differences), `base` its `pair`; nothing
        (0) when it leaves the disk or count bands further off (they come first). The sums run
        giver first, as over the change's brokers in order: the same floats, the same choices."""
        ledger = self.ledger
        gp0, gt0, tp0, tt0 = base
        gp1, gt1 = self.violation(giver, ledger.load[giver] - size, ledger.count[giver] - count,
                                  self.load[giver] - rate)
        tp1, tt1 = self.violation(taker, ledger.load[taker] + size, ledger.count[taker] + count,
                                  self.load[taker] + rate)
        placed = 0.0 + (gp0 - gp1) + (tp0 - tp1)
        traffic = 0.0 + (gt0 - gt1) + (tt0 - tt1)
        return 0.0 if placed < -_EPSILON else placed + traffic

    def move(self, index: int, s: int, d: int) -> None:
        rate = self.rate[index]
        self.ledger.move(index, s, d)
        self.load[s] -= rate
        self.load[d] += rate
        if self.m.parts[index].movable and rate:
            if s in self.items:
                del self.items[s][bisect.bisect_left(self.items[s], (rate, index))]
            if d in self.items:
                bisect.insort(self.items[d], (rate, index))


def balance_bytes_in(model: BalanceModel, ledger: Ledger, rates: list[int]) -> int:
    """Step 2b (module docstring); returns the changes made."""
    if not any(rates) or not model.brokers:
        return 0
    state = BytesIn(model, ledger, rates)
    steps, budget = 0, 4 * len(model.brokers) + 200
    stuck: set[int] = set()
    heap = [(-state.relative(b), b) for b in model.brokers if state.relative(b) > 0]
    heapq.heapify(heap)
    while steps < budget:
        worst = furthest_out(heap, state.relative, stuck)
        if worst is None:
            break
        change = _best_in_change(model, state, worst)
        if change is None:
            stuck.add(worst)
            continue
        touched = set()
        for index, s, d in change:
            state.move(index, s, d)
            touched |= {s, d}
        for b in touched:
            if state.relative(b) > 0:
                heapq.heappush(heap, (-state.relative(b), b))
        steps += 1
        stuck.clear()
    return steps


def _best_in_change(model: BalanceModel, state: BytesIn, b: int):
    """The cheapest change (bytes per violation removed) relieving broker b, or None."""
    hot = state.load[b] > state.high[b]
    ratio = {c: state.load[c] / state.unit[c] for c in model.group_members[model.group[b]]}
    peers = sorted((c for c in ratio if c != b), key=lambda c: (ratio[c] if hot else -ratio[c], c))[:_PEERS]
    parts, ledger, rates = model.parts, state.ledger, state.rate
    best = None
    for peer in peers:
        giver, taker = (b, peer) if hot else (peer, b)
        base = state.pair(giver, taker)
        # No change on this pair removes more than the pair's violation as it stands (each term
        # is at least 0 after): a change of cost c is at best c / most per unit removed, so one
        # whose cost alone puts it behind the best so far is passed over unpriced, the hard
        # rules unread: the same choice, with fewer trials (sizes span three decades).
        most = sum(base) * (1 + 1e-9) + _EPSILON
        sizes, values = ledger.sizes[taker], ledger.items[taker]
        for rate, index in reversed(state.busiest(giver)[-_CANDIDATES:]):
            part = parts[index]
            size = part.size
            if best is not None and size / most > best[0][0]:
                continue  # a swap costs more still
            if not model.fits(part, giver, taker):
                continue
            if model.may_take(part.topic, taker):
                best = _cheaper(best, state.gain(giver, taker, base, size, 1, rate), size, (index,),
                                ((index, giver, taker),))
            start = bisect.bisect_left(sizes, size)
            for back_size, other in values[max(0, start - _SCAN):start + _SCAN]:
                back_rate = rates[other]
                if back_rate >= rate or other == index:
                    continue
                if best is not None and (size + back_size) / most > best[0][0]:
                    continue
                back = parts[other]
                if not model.fits(back, taker, giver):
                    continue
                if back.topic != part.topic and not (model.may_take(part.topic, taker)
                                                     and model.may_take(back.topic, giver)):
                    continue  # a swap within one topic leaves its counts as they are
                best = _cheaper(best, state.gain(giver, taker, base, size - back_size, 0, rate - back_rate),
                                size + back_size, (index, other), ((index, giver, taker), (other, taker, giver)))
    return None if best is None else best[1]


def _cheaper(best, gained: float, cost: int, indices: tuple[int, ...], change):
    """`best` or `change`, whichever moves fewer bytes per violation removed (then fewer bytes,
    then by partition ids); a change that removes nothing never."""
    if gained <= _EPSILON:
        return best
    key = (cost / gained, cost, indices)
    return (key, change) if best is None or key < best[0] else best


# --- 4b. network out ---------------------------------------------------------------------------


def balance_network_out(model: BalanceModel, leaders: list[int | None], rates_in: list[int],
                        rates_out: list[int], choosable: frozenset[int]) -> list[int | None]:
    """Step 4b (module docstring): `leaders` (per partition) with network out in its bands where
    leadership alone can do it; only the partitions in `choosable` may change leader."""
    brokers = model.brokers
    in_tree = set(brokers)
    parts = model.parts
    leaders = list(leaders)
    weight = compute_leader_loads(model, rates_in, rates_out)
    if not any(weight[i] for i in choosable) or not brokers:
        return leaders
    load = dict.fromkeys(brokers, 0)
    count = dict.fromkeys(brokers, 0)
    for index, leader in enumerate(leaders):
        if leader in in_tree:
            load[leader] += weight[index]
            count[leader] += 1
    # Each broker's choosable leaderships gathered in id order, then sorted by weight alone (a
    # stable sort: ties stay in id order), i.e. by (weight, index), the order `bisect` keeps:
    # sorting integers by key costs half what sorting the tuples does.
    led: dict[int, list[tuple[int, int]]] = {}
    indices: dict[int, list[int]] = {b: [] for b in brokers}
    for index, leader in enumerate(leaders):
        if leader in in_tree and index in choosable:
            indices[leader].append(index)
    for b, values in indices.items():
        values.sort(key=weight.__getitem__)
        led[b] = [(weight[index], index) for index in values]
    del indices
    low, high = compute_even_bands(sum(load.values()), brokers, model.tolerances.network_out)
    llow, lhigh = compute_even_bands(sum(count.values()), brokers, model.tolerances.leaders)
    unit = {b: max(1, (low[b] + high[b]) // 2) for b in brokers}
    lunit = {b: max(1, (llow[b] + lhigh[b]) // 2) for b in brokers}


    def relative(b: int) -> float:
        return outside_band(load[b], low[b], high[b]) / unit[b]

    def gain(change) -> float:
        delta: dict[int, list[int]] = {}
        for index, s, d in change:
            for b, sign in ((s, -1), (d, 1)):
                entry = delta.setdefault(b, [0, 0])
                entry[0] += sign * weight[index]
                entry[1] += sign
        counts = traffic = 0.0
        for b, (do, dc) in delta.items():
            counts += (outside_band(count[b], llow[b], lhigh[b]) - outside_band(count[b] + dc, llow[b], lhigh[b])) / lunit[b]
            traffic += (outside_band(load[b], low[b], high[b]) - outside_band(load[b] + do, low[b], high[b])) / unit[b]
        return 0.0 if counts < -_EPSILON else counts + traffic  # leader counts first

    def changes_from_before(change) -> int:
        before = 0
        for index, s, d in change:
            original = parts[index].original[0] if parts[index].original else None
            before += (d != original) - (s != original)
        return before

    def consider(best, change):
        gained = gain(change)
        if gained <= _EPSILON:
            return best
        key = (-gained, changes_from_before(change), tuple(index for index, _, _ in change))
        return (key, change) if best is None or key < best[0] else best

    # The partitions a broker follows, busiest first, are read only for a broker below its band,
    # and only until _CANDIDATES are found that it does not lead: each broker's list grows from
    # one walk of the choosable partitions by (-weight, index), resumed where it stopped (the
    # replicas never move here). Building every broker's list up front cost more than all of 4b.
    follows: dict[int, list[int]] = {}
    cursor: dict[int, int] = {}
    descending: list[int] = []

    def followed(b: int):
        """The choosable partitions with traffic that b holds, by (-weight, index)."""
        if not descending:
            descending.extend(sorted(i for i in choosable if weight[i]))
            descending.sort(key=weight.__getitem__, reverse=True)  # stable: ids ascending in a tie
        known = follows.setdefault(b, [])
        position = 0
        while True:
            if position < len(known):
                yield known[position]
                position += 1
                continue
            at = cursor.get(b, 0)
            while at < len(descending) and b not in parts[descending[at]].final:
                at += 1
            cursor[b] = at + 1
            if at >= len(descending):
                return
            known.append(descending[at])

    def trades(best, index: int, giver: int, taker: int):
        """The leadership of `index` from giver to taker, alone or against a quieter one back."""
        best = consider(best, ((index, giver, taker),))
        found = 0
        for back_weight, back in led[taker][:_BACK_SCAN]:
            if back_weight >= weight[index]:
                break
            if giver in parts[back].final:
                best = consider(best, ((index, giver, taker), (back, taker, giver)))
                found += 1
                if found == _CANDIDATES:
                    break
        return best

    def best_change(b: int):
        best = None
        if load[b] > high[b]:  # hand over one of its busiest leaderships to one of its followers
            for out, index in reversed(led[b][-_CANDIDATES:]):
                if out == 0:
                    break
                for follower in parts[index].final:
                    if follower != b and follower in in_tree:
                        best = trades(best, index, b, follower)
        else:  # take over one of the busiest leaderships among the partitions it follows
            taken = 0
            for index in followed(b):  # busiest first (by -weight, then id)
                if leaders[index] != b and leaders[index] in in_tree:
                    best = trades(best, index, leaders[index], b)
                    taken += 1
                    if taken == _CANDIDATES:
                        break
        return None if best is None else best[1]

    steps, budget = 0, 4 * len(brokers) + 200
    stuck: set[int] = set()
    while steps < budget:
        outside = [(relative(b), b) for b in brokers if relative(b) > 0 and b not in stuck]
        if not outside:
            break
        _, worst = max(outside, key=lambda e: (e[0], -e[1]))
        change = best_change(worst)
        if change is None:
            stuck.add(worst)
            continue
        for index, s, d in change:
            leaders[index] = d
            load[s] -= weight[index]
            load[d] += weight[index]
            count[s] -= 1
            count[d] += 1
            del led[s][bisect.bisect_left(led[s], (weight[index], index))]
            bisect.insort(led[d], (weight[index], index))
        steps += 1
        stuck.clear()
    return leaders
