"""The greedy of the bytes-balance plan (`planning.placement.bytes_balance`, steps 1, 2 and 2c):
the forced moves, the balance moves and swaps, the shrink pass and the count evening, on the ledger
(`planning.placement.bytes_ledger`).

COST. A balance step touches what its move touches: the broker furthest out comes from a heap
(stale entries dropped as they surface), its counterparts from its rack group, each pair's
candidates from bisects of sorted integer sizes near a few probed sizes, each candidate's rank
from a per-pair scorer (only the bytes terms depend on the replica) and its rack check from
answers remembered per tree-node pattern (`BalanceModel.fits`). A step's move is followed by
more on the same pair while each is as good (`_continue_pair`; at 300k partitions ~8 moves a
step instead of 1: the counterparts are ranked once per batch). Among moves equal on bytes,
bounds and harm, the fullest broker gives and the emptiest takes (SPREAD, `_pair_scorer`), in a
batch too (a heap of the peers' levels); a broker that needs replicas as well as bytes takes from
each giver the size that suits the giver (WATER, `_suited_size`). Nothing a step does walks the
partitions; the shrink pass walks them once and then only the partitions moved, passing over
those no replica could improve once the plan is within its bands (`shrink_moves`, `slack`).
The count evening ranks a closed group's brokers per move and looks at a giver's smallest
replicas only (`even_counts`: ~3,000 moves and ~1 s of CPU at 300k partitions).

Pure: works on the plan's scratch (`Part`s, a `Ledger`), deterministic.
"""

from __future__ import annotations

import bisect
import heapq
import math

from planning.model import TopicPartition
from planning.placement.bytes_ledger import Ledger
from planning.placement.bytes_model import BalanceModel

_SCAN = 32  # replicas looked at either side of a wanted size before giving up on a pair
_PROBED_DEFICITS = 4  # other brokers' needs used as wanted sizes for a replica out
_SWAP_SMALLS = 4  # the smallest replicas tried as the way back of a swap
_SHRINK_PASSES = 3
_COUNTERPARTS = 8  # peers looked at first for a move
_BATCH = 32  # moves a step may make on the pair it picked (`_continue_pair`)
_LEVEL_SLACK = 0.02  # how far (of its share) a batch may take the other broker past the peers' level
_SMALL_REPLICA = 20_000  # a replica below this fraction of a broker's byte share is placed by counts (`place_slots`)


def place_slots(model: BalanceModel, ledger: Ledger) -> list[TopicPartition]:
    """Fill every open slot, largest replica first, each where the bounds stay lowest, then on
    the broker least loaded for its share: in bytes, but in replicas for a replica below
    1/`_SMALL_REPLICA` of the broker's byte share (SMALL). The partitions that could not be
    completed (too few eligible brokers for the rack rule) go back to their original replicas.

    SMALL. Placed largest first for the disks, a drain's many small replicas went to the
    emptiest broker while it stayed the emptiest (a replica of some megabytes hardly changes
    it), and the counts spread: bench (c), a broker removed, at the drain's own bytes, replica
    spread 241 / 210 / 228 with the disks at their floor; by counts, 185 / 188 / 179, the disk CV
    the same to the fourth place."""
    slots = sorted(((part.size, index) for index, part in enumerate(model.parts) for b in part.final if b is None),
                   key=lambda s: (-s[0], s[1]))
    unplaced: list[TopicPartition] = []
    for size, index in slots:
        part = model.parts[index]
        if None not in part.final:
            continue
        best, best_key = None, None
        for d in model.brokers:
            if not model.fits(part, None, d):
                continue
            lb, cb, _, _ = ledger.evaluate(None, d, size)
            disk = (ledger.load[d] + size) / max(1, model.bshare_floor[d])
            replicas = (ledger.count[d] + 1) / max(1, model.cshare_floor[d])
            small = size * _SMALL_REPLICA < model.bshare_floor[d]
            key = (not model.may_take(part.topic, d), lb, cb, replicas if small else disk,
                   disk if small else replicas, d)
            if best_key is None or key < best_key:
                best, best_key = d, key
        if best is None:
            unplaced.append(part.state.tp)
            _restore(model, ledger, index)
            continue
        ledger.move(index, None, best)
    return unplaced


def _restore(model: BalanceModel, ledger: Ledger, index: int) -> None:
    """Give a partition that cannot be completed its original replicas back (it stays as it is)."""
    part = model.parts[index]
    for b in list(part.members):
        ledger.release(index, b)
    part.final = list(part.original)
    part.movable = False
    part.fixed = True
    for b in part.final:
        if b in model.tree.broker_node:
            part.members.add(b)
            part.changed()
            ledger.shift(b, part.size, 1)
            model.topic_count[(part.topic, b)] = model.topic_count.get((part.topic, b), 0) + 1


# --- 2. balance --------------------------------------------------------------------------------------


def balance_moves(model: BalanceModel, ledger: Ledger) -> int:
    steps = 0
    budget = 2 * sum(len(p.members) for p in model.parts) + 100
    stuck: set[int] = set()
    outside = {b: ledger.relative_violation(b) for b in model.brokers}  # kept for the brokers moves touch
    # The brokers outside, furthest first (ties: lowest id), as a heap of (-violation, broker):
    # an entry is current while it matches `outside`; a move pushes the new values of the two
    # brokers it touches and stale entries are dropped when they surface (O(log n) a step, not
    # a walk over every broker).
    heap = [(-value, b) for b, value in outside.items() if value > 0]
    heapq.heapify(heap)
    while steps < budget:
        worst = furthest_out(heap, outside.__getitem__, stuck)
        if worst is None:
            break
        move = _best_move(model, ledger, worst)
        if move is not None:
            key, index, s, d = move
            before = (ledger.lb_total, ledger.cb_total)
            ledger.move(index, s, d)
            touched = {s, d}
            steps += _continue_pair(model, ledger, worst, s, d, key, before, budget - steps - 1, touched)
        else:
            swap = _best_swap(model, ledger, worst)
            if swap is None:
                stuck.add(worst)
                continue
            _, (i1, s1, d1), (i2, s2, d2) = swap
            ledger.move(i1, s1, d1)
            ledger.move(i2, s2, d2)
            touched = {s1, d1}
        for b in sorted(touched):
            value = outside[b] = ledger.relative_violation(b)
            if value > 0:
                heapq.heappush(heap, (-value, b))
        steps += 1
        stuck.clear()
    return steps


def _continue_pair(model: BalanceModel, ledger: Ledger, b: int, s: int, d: int, key, before, budget: int,
                   touched: set[int]) -> int:
    """After the step's move `key` from s to d (to relieve b; `before`: the bytes and count
    bounds before it), more moves relieving b while each is as good as that one was: returns
    how many were made (at most `_BATCH - 1` and `budget`); the brokers they touched are added
    to `touched`.

    WHY. A step ranks a replica of each of a handful of counterparts (`_best_move`, the bulk of
    the planner's time at 300k partitions); a batch's moves are ranked on one pair each, at an
    eighth of that. A further move must be one a step could take: b still outside its bands,
    the move lowering the total violation (the scorer's rule), and on the key's first terms no
    worse than the step's move: what it adds to bytes moved plus the bound no more than the
    step's move added, the same for the replica-count bound, and no more harm to the other
    broker. The pair's replicas are probed as a step probes them (its wanted size).

    SPREAD holds across the batch: the other broker goes on giving (taking) while it is still
    about as loaded (as little loaded), relative to its share, as the most (least) loaded other
    peer of b, within `_LEVEL_SLACK`; past that, the batch goes on with that peer instead (a
    heap of the peers' levels): the water level steps one at a time would keep, at a batch's
    cost."""
    waste, count_waste, harm = key[0] - before[0], key[1] - before[1], key[2]
    load, floor = ledger.load, model.bshare_floor
    giving = b == d  # the other side gives to b
    sign = -1 if giving else 1  # heap order: the most loaded giver, the least loaded taker first
    other = s if giving else d
    heap = [(sign * load[c] / (floor[c] or 1), c) for c in model.group_members[model.group[b]] if c != b and c != other]
    heapq.heapify(heap)
    made = tried = 0
    while made < min(_BATCH - 1, budget) and ledger.relative_violation(b) > 0:
        level = sign * load[other] / (floor[other] or 1)
        if heap and level > heap[0][0] + _LEVEL_SLACK:
            other = heapq.heapreplace(heap, (level, other))[1]
        s, d = (other, b) if giving else (b, other)
        wanted, probes = _pair_probes(model, ledger, b, s, d)
        if wanted is None:
            break
        best = _best_of_pair(model, ledger, s, d, b, wanted, probes, None)
        if best is None or (best[0][0] - ledger.lb_total > waste or best[0][1] - ledger.cb_total > count_waste
                            or best[0][2] > harm):
            # Not as good as the step's move: the next peer in line is tried instead, a few at
            # most (each costs a pair's ranking), this one set aside for the rest of the batch.
            tried += 1
            if not heap or tried >= _COUNTERPARTS:
                break
            other = heapq.heappop(heap)[1]
            continue
        ledger.move(best[1], s, d)
        touched.add(other)
        made += 1
    return made


def _suited_size(model: BalanceModel, ledger: Ledger, giver: int) -> float | None:
    """The replica size that brings a giver towards its shares of bytes and replicas together
    (WATER): what it holds above its byte share per replica above its replica share; None when
    it holds no replica above its share."""
    above = ledger.count[giver] - model.cshare_floor[giver]
    return max(0, ledger.load[giver] - model.bshare_floor[giver]) / above if above > 0 else None


def _pair_probes(model: BalanceModel, ledger: Ledger, b: int, s: int, d: int):
    """(wanted size, probed sizes) of a move from s to d relieving b, as `_best_move_among`
    works them out for that pair; (None, None) when b needs nothing that way."""
    over_bytes, over_count, under_bytes, under_count = _needs(ledger, b)
    if b == s:
        if not (over_bytes or over_count):
            return None, None
        wanted = max(over_bytes / max(1, over_count), over_bytes / max(1, ledger.count[b] - model.clo[b]))
        probes = {wanted, 0}
        if ledger.load[d] < model.blo[d]:
            probes.add(min(wanted, model.blo[d] - ledger.load[d]))
        return wanted, sorted(probes)
    if not (under_bytes or under_count):
        return None, None
    wanted = max(under_bytes / max(1, under_count), under_bytes / max(1, model.chi[b] - ledger.count[b]))
    excess = ledger.load[s] - model.bhi[s]
    probes = {wanted, 0}
    if excess > 0:
        probes |= {excess, min(wanted, excess)}
    return wanted, sorted(probes)


def furthest_out(heap: list[tuple[float, int]], current, stuck: set[int]) -> int | None:
    """The broker furthest outside its bands on a heap of (-violation, broker) whose entries may
    be stale (dropped when `-value != current(broker)`), skipping `stuck` ones (kept on the heap);
    None when no broker is left."""
    aside, worst = [], None
    while heap:
        value, b = heap[0]
        if -value != current(b):
            heapq.heappop(heap)
        elif b in stuck:
            aside.append(heapq.heappop(heap))
        else:
            worst = b
            break
    for entry in aside:
        heapq.heappush(heap, entry)
    return worst


def _needs(ledger: Ledger, b: int) -> tuple[int, int, int, int]:
    """(bytes over, replicas over, bytes under, replicas under) of broker b."""
    m = ledger.m
    load, count = ledger.load[b], ledger.count[b]
    return (max(0, load - m.bhi[b]), max(0, count - m.chi[b]),
            max(0, m.blo[b] - load), max(0, m.clo[b] - count))


def _nearest(values: list[tuple[int, int]], sizes: list[int], wanted: float, accept) -> list[tuple[int, int]]:
    """The largest entry of `values` at most `wanted` and the smallest above it that `accept`
    takes (each within `_SCAN` entries of the wanted size); `sizes` are the values' sizes."""
    found = []
    # Sizes are integers, so "at most wanted" is "at most its floor": an int probe compares
    # several times faster than a float one.
    start = bisect.bisect_right(sizes, math.floor(wanted))
    for i in range(start - 1, max(-1, start - 1 - _SCAN), -1):
        if accept(values[i]):
            found.append(values[i])
            break
    for i in range(start, min(len(values), start + _SCAN)):
        if accept(values[i]):
            found.append(values[i])
            break
    return found


def _pair_scorer(model: BalanceModel, ledger: Ledger, s: int, d: int, b: int, wanted: float):
    """The ranking of a move of any replica from s to d, to relieve b (smaller is better), as a
    function of the replica's size and index: None when the move does not lower the total
    violation (`planning.placement.bytes_balance`, step 2).

    The balance step ranks about 25 replicas on a handful of (s, d) pairs, and only the bytes
    terms depend on the replica: the replica counts after the move, the count bound, each side's
    count violation and the bytes terms before the move are worked out once per pair here. The
    arithmetic is `Ledger.evaluate`'s, term for term (the same integers, so the same keys)."""
    load, count, band = ledger.load, ledger.count, ledger.band
    cunit, bunit = ledger.cunit, ledger.bunit
    ls, cs, ld, cd = load[s], count[s], load[d], count[d]
    his, los, chis, clos, gs = band[s]
    hid, lod, chid, clod, gd = band[d]
    cs1, cd1 = cs - 1, cd + 1
    es0, fs0 = max(0, ls - his), max(0, los - ls)
    ed0, fd0 = max(0, ld - hid), max(0, lod - ld)
    ces = max(0, cs1 - chis) - max(0, cs - chis)
    cfs = max(0, clos - cs1) - max(0, clos - cs)
    ced = max(0, cd1 - chid) - max(0, cd - chid)
    cfd = max(0, clod - cd1) - max(0, clod - cd)
    count_ds, count_dd = (ces + cfs) * bunit, (ced + cfd) * bunit
    trap_before = ((es0 if es0 and cs <= clos else fs0 if fs0 and cs >= chis else 0)
                   + (ed0 if ed0 and cd <= clod else fd0 if fd0 and cd >= chid else 0))
    s_traps_excess, s_traps_deficit = cs1 <= clos, cs1 >= chis
    d_traps_excess, d_traps_deficit = cd1 <= clod, cd1 >= chid
    # The replica-count bound after the move (no bytes in it), and each group's bytes terms
    # before it: (its deficit, its excess plus what it lacks, their max). A pair in one group
    # (every balance move: counterparts are peers) changes its held bytes and replicas by 0.
    cb = ledger.cb_total
    for g, dch, dce, dcd in ((gs, 0, ces + ced, cfs + cfd),) if gs == gd else ((gs, -1, ces, cfs), (gd, 1, ced, cfd)):
        held, exc, deficit, target = ledger.gc_held[g], ledger.gc_exc[g], ledger.gc_def[g], model.group_count[g]
        cb += max(deficit + dcd, exc + dce + target - held - dch) - max(deficit, exc + target - held)
    deficit_s, rest_s = ledger.g_def[gs], ledger.g_exc[gs] + model.group_bytes[gs] - ledger.g_held[gs]
    deficit_d, rest_d = ledger.g_def[gd], ledger.g_exc[gd] + model.group_bytes[gd] - ledger.g_held[gd]
    one_group = gs == gd
    base = ledger.lb_total - trap_before - max(deficit_s, rest_s) - (0 if one_group else max(deficit_d, rest_d))
    d_is_other = s == b
    bfloor_s, bfloor_d = model.bshare_floor[s], model.bshare_floor[d]
    count_side_d, count_side_s = cd1 <= model.cshare_floor[d] + 1, cs1 >= model.cshare_floor[s]
    # SPREAD: among moves equal on bytes, bounds and harm, the other broker's load relative to
    # its share decides (the least loaded takes, the most loaded gives): the bytes a plan must
    # move anyway are taken off the fullest brokers and given to the emptiest, which lowers
    # the disk spread at no cost in bytes.
    level = ld / (bfloor_d or 1) if d_is_other else -ls / (bfloor_s or 1)

    def score(x: int, index: int):
        l1 = ls - x
        es1 = l1 - his if l1 > his else 0
        fs1 = los - l1 if l1 < los else 0
        l1 = ld + x
        ed1 = l1 - hid if l1 > hid else 0
        fd1 = lod - l1 if l1 < lod else 0
        ds = (es1 + fs1 - es0 - fs0) * cunit + count_ds
        dd = (ed1 + fd1 - ed0 - fd0) * cunit + count_dd
        if ds + dd >= 0:
            return None
        lb = base
        if s_traps_excess and es1:
            lb += es1
        elif s_traps_deficit and fs1:
            lb += fs1
        if d_traps_excess and ed1:
            lb += ed1
        elif d_traps_deficit and fd1:
            lb += fd1
        if one_group:
            lb += max(deficit_s + fs1 - fs0 + fd1 - fd0, rest_s + es1 - es0 + ed1 - ed0)
        else:
            lb += max(deficit_s + fs1 - fs0, rest_s + es1 - es0 + x) + max(deficit_d + fd1 - fd0, rest_d + ed1 - ed0 - x)
        if d_is_other:
            other_delta, other_side = dd, ld + x <= bfloor_d and count_side_d
        else:
            other_delta, other_side = ds, ls - x >= bfloor_s and count_side_s
        harm = 0 if other_delta < 0 else (1 if other_side else 2)
        return (x + lb, cb, harm, level, abs(x - wanted), s, d, index)

    return score


def _best_move(model: BalanceModel, ledger: Ledger, b: int):
    """The best single move into or out of broker b: (key, partition index, from, to) or None.
    Looks at the `_COUNTERPARTS` most useful peers first (those outside their bands the other
    way, then the furthest from their share the other way), and at all of them when none of
    those has a move."""
    peers = [c for c in model.group_members[model.group[b]] if c != b]
    if len(peers) <= _COUNTERPARTS:
        return _best_move_among(model, ledger, b, peers, peers)

    load, count, band, floor = ledger.load, ledger.count, ledger.band, model.bshare_floor
    # (within or above its low bands, relative load, id) and (within or below its high bands,
    # minus the relative load, id): the keys are distinct (ids), so the first few are exact.
    # Only the side b needs is ranked (a broker is rarely over on one band and under on another).
    over_bytes, over_count, under_bytes, under_count = _needs(ledger, b)
    relative = [(c, load[c], count[c], band[c], load[c] / (floor[c] or 1)) for c in peers]
    receivers = donors = peers
    if over_bytes or over_count:
        receiving = sorted([(l >= lo and n >= clo, r, c) for c, l, n, (_, lo, _, clo, _), r in relative])
        receivers = [c for _, _, c in receiving[:_COUNTERPARTS]]
    if under_bytes or under_count:
        giving = sorted([(l <= hi and n <= chi, -r, c) for c, l, n, (hi, _, chi, _, _), r in relative])
        donors = [c for _, _, c in giving[:_COUNTERPARTS]]
    best = _best_move_among(model, ledger, b, receivers, donors)
    return best if best is not None else _best_move_among(model, ledger, b, peers, peers)


def _acceptor(model: BalanceModel, leaving: int, coming: int):
    """`accept(item)`: the replica `item` (size, partition index) on `leaving` may move to
    `coming` (topic limit, rack rule), each partition asked once: the probes of one pair scan
    overlapping stretches of the same sorted list."""
    parts, caps, counts = model.parts, model.topic_cap, model.topic_count
    verdicts: dict[int, bool] = {}

    def accept(item) -> bool:
        index = item[1]
        verdict = verdicts.get(index)
        if verdict is None:
            part = parts[index]
            key = (part.topic, coming)
            verdict = verdicts[index] = ((caps is None or counts.get(key, 0) + 1 <= caps.get(key, 0))
                                         and model.fits(part, leaving, coming))
        return verdict

    return accept


def _best_move_among(model: BalanceModel, ledger: Ledger, b: int, receivers: list[int], donors: list[int]):
    over_bytes, over_count, under_bytes, under_count = _needs(ledger, b)
    best = None
    if over_bytes or over_count:
        # What it still needs per replica, and at least what its replica room allows.
        wanted = max(over_bytes / max(1, over_count), over_bytes / max(1, ledger.count[b] - model.clo[b]))
        deficits = sorted((ledger.load[d] - model.blo[d], d) for d in receivers if ledger.load[d] < model.blo[d])
        probes = sorted({wanted, 0} | {min(wanted, -gap) for gap, _ in deficits[:_PROBED_DEFICITS]})
        for d in receivers:
            best = _best_of_pair(model, ledger, b, d, b, wanted, probes, best)
    if under_bytes or under_count:
        wanted = max(under_bytes / max(1, under_count), under_bytes / max(1, model.chi[b] - ledger.count[b]))
        for donor in donors:
            excess = ledger.load[donor] - model.bhi[donor]
            probes = {wanted, 0}
            if excess > 0:
                probes |= {excess, min(wanted, excess)}
            best = _best_of_pair(model, ledger, donor, b, b, wanted, sorted(probes), best)
    return best


def _best_of_pair(model: BalanceModel, ledger: Ledger, s: int, d: int, b: int, wanted: float, probes, best):
    """`best`, or a better move of one of s's replicas nearest the probed sizes to d."""
    accept = _acceptor(model, s, d)
    values, sizes = ledger.items[s], ledger.sizes[s]
    if s != b and ledger.count[b] < model.clo[b]:  # b takes, and needs replicas as well as bytes
        suited = _suited_size(model, ledger, s)
        if suited is not None:
            wanted = suited
            probes = sorted({*probes, suited})
    seen = set()
    score = None  # made at the first replica that may move (most pairs have one)
    for probe in probes:
        for item in _nearest(values, sizes, probe, accept):
            if item in seen:
                continue
            seen.add(item)
            if score is None:
                score = _pair_scorer(model, ledger, s, d, b, wanted)
            key = score(*item)
            if key is not None and (best is None or key < best[0]):
                best = (key, item[1], s, d)
    return best


def _best_swap(model: BalanceModel, ledger: Ledger, b: int):
    """When no single move helps b on bytes: one replica from a giver to a taker and a smaller one
    back (b is one of them), whose difference covers b's bytes need and lowers the total
    violation. The smallest replicas go back, each against the smallest one out that covers
    it: the fewest bytes for the net change. A replica out that the per-topic limit keeps off
    the taker may trade places with the taker's smallest replica of its own topic instead (the
    topic's counts stay as they are): without it, a broker filled with small replicas of a
    topic could never take one of its big ones (regression, real-stack scenario, 2026-11-26)."""
    over_bytes, _, under_bytes, _ = _needs(ledger, b)
    need = over_bytes or under_bytes
    if not need:
        return None
    parts = model.parts
    peers = [c for c in model.group_members[model.group[b]] if c != b]
    best = None
    for peer in peers:
        giver, taker = (b, peer) if over_bytes else (peer, b)
        smalls = []
        for item in ledger.items[taker][:_SCAN]:
            part = parts[item[1]]
            if model.may_take(part.topic, giver) and model.fits(part, taker, giver):
                smalls.append(item)
                if len(smalls) == _SWAP_SMALLS:
                    break
        bigs, sizes = ledger.items[giver], ledger.sizes[giver]
        for small in smalls:
            for big in _covering(bigs, sizes, small[0] + need):
                part = parts[big[1]]
                if big[1] == small[1] or not (model.may_take(part.topic, taker) and model.fits(part, giver, taker)):
                    continue
                best = _better_swap(ledger, best, big, small, giver, taker)
                break
        for big in _covering(bigs, sizes, need):
            part = parts[big[1]]
            if model.may_take(part.topic, taker) or not model.fits(part, giver, taker):
                continue
            small = _smallest_of_topic(model, ledger, taker, giver, part.topic)
            if small is not None and small[0] < big[0]:  # it need not cover all: it must help
                best = _better_swap(ledger, best, big, small, giver, taker)
    return best


def _covering(items: list[tuple[int, int]], sizes: list[int], wanted: int) -> list[tuple[int, int]]:
    """The `_SCAN` replicas of `items` (sorted by size; `sizes` theirs) from the smallest of at
    least `wanted` bytes up; when none is that large, the `_SCAN` largest, largest first. A
    swap need not cover a need larger than any replica to help (regression, real-stack
    scenario, 2026-11-28: a broker 8,004,081 B over its band held 8,001,429 B replicas, so no
    swap was tried and the whole rack group was left as it was, 24.4 MB against 5.4 MB)."""
    start = bisect.bisect_left(sizes, wanted)
    if start < len(items):
        return items[start:start + _SCAN]
    return items[max(0, len(items) - _SCAN):][::-1]


def _smallest_of_topic(model: BalanceModel, ledger: Ledger, taker: int, giver: int, topic: int):
    """The smallest replica of `topic` on `taker` that may go to `giver`, among its
    `_SCAN * _SWAP_SMALLS` smallest replicas; None when there is none."""
    parts = model.parts
    for item in ledger.items[taker][:_SCAN * _SWAP_SMALLS]:
        part = parts[item[1]]
        if part.topic == topic and model.fits(part, taker, giver):
            return item
    return None


def _better_swap(ledger: Ledger, best, big, small, giver: int, taker: int):
    """`best`, or the swap of `big` (giver → taker) and `small` (taker → giver) when it lowers
    the two brokers' violation and costs less (bytes plus the bound that remains, then the
    replica-count bound, then ids)."""
    before = sum(ledger.violation(c, ledger.load[c], ledger.count[c]) for c in (giver, taker))
    ledger.move(big[1], giver, taker)
    lb, cb, ds, dd = ledger.evaluate(taker, giver, small[0])
    after = sum(ledger.violation(c, ledger.load[c], ledger.count[c]) for c in (giver, taker)) + ds + dd
    ledger.move(big[1], taker, giver)
    if after < before:
        key = (big[0] + small[0] + lb, cb, giver, taker, big[1], small[1])
        if best is None or key < best[0]:
            return key, (big[1], giver, taker), (small[1], taker, giver)
    return best


def shrink_moves(model: BalanceModel, ledger: Ledger, slack: int | None = None) -> int:
    """Once the greedy is done: a replica moved from s to d goes back to s and a smaller one of a
    peer in d's group moves to d instead, when no broker touched ends further outside its bands
    and the bytes fall (largest moves first, until a pass finds nothing). Returns the bytes saved.

    `slack`: the bytes moved less the lower bound, given when every broker is within its bands.
    A shrink keeps them all within (no broker ends further outside), and no plan within the
    bands moves less than the bound, so a shrink saves at most the slack: the replica that
    takes the place of one of x bytes is at least x - slack. A change with no movable replica of
    such a size anywhere is passed over without a trial (at 300k partitions a plan at its bound
    has ~40,000 changes, each a trial over ~70 peers otherwise)."""
    parts, tree = model.parts, model.tree
    saved = 0
    all_sizes = sorted(part.size for part in parts if part.movable) if slack is not None else None
    # Only a partition with a new replica can be a change to shrink: those the greedy moved
    # (one walk), and those a shrink moves in (added as it goes), never a walk per pass.
    moved = {index for index, part in enumerate(parts)
             if part.movable and any(b not in part.original for b in part.final)}
    for _ in range(_SHRINK_PASSES):
        changes = []
        for index in moved:
            part = parts[index]
            new = [b for b in part.final if b not in part.original]
            gone = [b for b in part.original if b not in part.final and b in tree.broker_node]
            if len(new) == 1 and len(gone) == 1:
                changes.append((part.size, index, gone[0], new[0]))
        changes.sort(key=lambda c: (-c[0], c[1]))
        found = 0
        for x, index, s, d in changes:
            part = parts[index]
            if d not in part.members or s in part.members:  # changed earlier in this pass
                continue
            need = max(0, model.blo[d] - (ledger.load[d] - x))
            if slack is not None:
                need = max(need, x - (slack - saved))
                at = bisect.bisect_left(all_sizes, need)
                if at == len(all_sizes) or all_sizes[at] >= x:
                    continue  # no replica anywhere could save bytes here
            if not (model.may_take(part.topic, s) and model.fits(part, d, s)):
                continue
            touched = {s, d}
            before = {b: ledger.violation(b, ledger.load[b], ledger.count[b]) for b in touched}
            ledger.move(index, d, s)
            best = None
            for peer in model.group_members[model.group[d]]:
                if peer == d:
                    continue
                sizes = ledger.sizes[peer]
                start = bisect.bisect_left(sizes, need)
                if start == len(sizes) or sizes[start] >= (x if best is None else best[0]):
                    continue  # nothing smaller than the best so far that covers the need
                for y, other in ledger.items[peer][start:start + _SCAN]:
                    if y >= x or (best is not None and y >= best[0]):
                        break
                    candidate = parts[other]
                    if other == index or not (model.may_take(candidate.topic, d) and model.fits(candidate, peer, d)):
                        continue
                    old = sum(before.values()) + (0 if peer in touched else
                                                  ledger.violation(peer, ledger.load[peer], ledger.count[peer]))
                    lb, cb, dp, dd = ledger.evaluate(peer, d, y)
                    now = sum(ledger.violation(b, ledger.load[b], ledger.count[b]) for b in touched | {peer}) + dp + dd
                    if now <= old:
                        best = (y, other, peer)
                    break
            if best is None:
                ledger.move(index, s, d)
                continue
            y, other, peer = best
            ledger.move(other, peer, d)
            moved.add(other)
            saved += x - y
            found += 1
        if not found:
            break
    return saved


# --- 2c. even counts ---------------------------------------------------------------------------------


def even_counts(model: BalanceModel, ledger: Ledger, budget: int, moves: int, bytes_in=None) -> int:
    """Once the bands are met or as near as the greedy gets: the smallest replicas move from the
    broker holding the most replicas for its share to the one holding the fewest, in each closed
    rack group, while their counts are at least two apart, no broker leaves its disk band (nor
    its bytes-in band once traffic is measured: `bytes_in`, `traffic_moves.BytesIn` on this
    ledger, whose `move` then makes the moves), every hard rule and topic limit holds, and these
    moves add at most `budget` bytes and `moves` replicas. Returns the bytes they add.

    A move costs what it adds to the plan (`_cheapest_fitting`): a replica the plan brings to
    the giver goes on to the taker instead, the same copy from its origin, no byte more; one
    that goes back where it was saves its bytes. Of the giver's smallest, the cheapest moves.

    WHY. A count band of ±10 % leaves up to a fifth of a share between brokers; where replicas of
    a few megabytes are common, the difference costs a hundredth of the bytes the plan moves
    anyway, and what a broker pays per replica (open files, fetcher work, leadership counts to
    come) comes out even. The caller sizes both budgets on what the plan moves already (a plan
    that moves nothing evens nothing). Each move lowers the sum of squared count deviations, so
    it ends."""
    spent = made = 0
    move_replica = bytes_in.move if bytes_in is not None else ledger.move
    count, share = ledger.count, model.cshare_floor
    for g in sorted(model.group_members):
        members = [b for b in model.group_members[g] if share[b] > 0]
        stuck: set[tuple[int, int]] = set()
        while made < moves and len(members) > 1:
            ranked = sorted(members, key=lambda b: (count[b] / share[b], b))
            move = None
            for lo in ranked[:_COUNTERPARTS]:
                for hi in reversed(ranked[-_COUNTERPARTS:]):
                    if count[hi] - count[lo] < 2 or count[hi] * share[lo] <= (count[lo] + 1) * share[hi]:
                        break  # no richer broker left for this one
                    if (hi, lo) in stuck:
                        continue
                    move = _cheapest_fitting(model, ledger, hi, lo, budget - spent, bytes_in)
                    if move is not None:
                        break
                    stuck.add((hi, lo))
                if move is not None:
                    break
            if move is None:
                break
            extra, index = move
            move_replica(index, hi, lo)
            spent += extra
            made += extra > 0
            stuck = {pair for pair in stuck if hi not in pair and lo not in pair}
    return spent


def _cheapest_fitting(model: BalanceModel, ledger: Ledger, s: int, d: int, room: int, bytes_in):
    """Of s's `2 * _SCAN` smallest movable replicas, the one that may move to d within the bands
    (`even_counts`) adding the fewest bytes, the smallest of those: (bytes it adds, partition
    index), or None. One the plan brought to s adds none; one that was on d takes its bytes
    off; any other adds its size, within `room`."""
    accept = _acceptor(model, s, d)
    low_s = model.blo[s] - ledger.load[s]  # -x must stay at or above this
    high_d = model.bhi[d] - ledger.load[d]
    parts = model.parts
    best = None
    for item in ledger.items[s][:2 * _SCAN]:
        size, index = item
        if size > high_d:
            break  # sorted by size: none after it fits either
        original = parts[index].original
        extra = size * ((s in original) - (d in original))
        if (extra > room or (best is not None and extra >= best[0]) or -size < low_s or not accept(item)
                or not _bytes_in_fits(bytes_in, index, s, d)):
            continue
        best = (extra, index)
    return best


def _bytes_in_fits(bytes_in, index: int, s: int, d: int) -> bool:
    """The replica's bytes in keep both brokers within their bytes-in bands (or no worse), once
    traffic is measured."""
    if bytes_in is None:
        return True
    rate, load = bytes_in.rate[index], bytes_in.load
    return not (load[s] - rate < min(bytes_in.low[s], load[s]) or load[d] + rate > max(bytes_in.high[d], load[d]))
