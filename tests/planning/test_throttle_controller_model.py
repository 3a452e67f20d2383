"""`decide_throttles` in a closed loop with a linear latency model (pure; simulated ms, a decision
every `tick_ms`; `test_throttle_control` has the M/M/1 one).

MODEL, per broker: the movement copies min(rate x tick, the bytes it has left) each window, so it
is saturated while data remains; the window's canary p99 = baseline + k x (MB/s copied through the
broker) + an external load (ms) that steps at chosen decisions; a partition outside the moves loses
an ISR replica in a window whose p99 is above `isr_factor` x baseline. Each decision gets the last
window's p99, the two windows' before it, the baseline, the shrinks since the broker's last change
and `is_saturated`. A window over the SLO alone is held; a second of the last three cuts, so a run
of windows over the SLO meets its first cut `late` = max(0, HURT_WINDOWS - h) decisions after a
hold would allow it.
R: the highest rate whose window is healthy (within the SLO, no shrink); h = max(1, ceil(hold /
tick)), the decisions between two changes; chain(r, x): the decreases (r -> max(min, int(r x
decrease))) that bring r to x or below.

1. bounds: every rate in [min, max(min, min(max, the schedule's rate for the hour))], every move
   count in [1, B], whatever the load, schedule and hour.
2. convergence: U, the highest rate whose window is at or below the raise line (`raise_share` of
   the way from the baseline to the SLO, no shrink); climb(r, x): the raises (r -> r + min(increase,
   max(1, int(r / 2)))) that bring r to x or above; a raise is a ramp (RAMP: its first step at
   once, its target within 5 s), so raises are p = max(h, ceil(5 s / tick) + 1) decisions apart at
   least. With the load constant from decision s, from s + p x (chain(max, min) + 1 + climb(min,
   lo)) + late on the rate stays in [lo, hi] = [max(min, min(int((R + 1) x decrease), U + 1)),
   min(max, max(R, U + increase))] (a raise is decided only from <= U and aims at that plus its
   step, a ramp never passes its target, a cut comes only from > R and halves what the copies used,
   decisions at least h apart), its windows over the
   SLO come in runs of at most h x chain(hi, R) + late decisions, each followed by at least h healthy
   ones; when U + increase <= R (the band is wider than a step) it never crosses the SLO again
   and is never cut; pinned at max when U >= max, at min when R < min. 2b: the same after a step of the load, up or down (regression, `STUCK_AT_THE_FLOOR`: a
   broker hurt at the floor with one move kept its last change's time, so the shrink it answered
   counted again at every decision and held it at the floor after the load was gone).
3. a load step that breaks the SLO at the rate in force lowers it within max(h, HURT_WINDOWS)
   decisions, and within h x chain(rate, R') + late decisions the window is healthy again (R' >=
   min), or the rate is at min.
4. no starvation: each window moves >= min(left, min x tick) bytes, so D bytes through a broker
   are done within ceil(D / (min x tick)) windows.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from handlers.throttle import HOUR_MS
from planning.movement.canary import RECENT_WINDOWS
from planning.movement.throttle_control import (HURT_WINDOWS, BrokerSignal, BrokerThrottle, Schedule, ThrottleBounds,
                                                decide_throttles, is_saturated)
from test_throttle_control import MB, aimed

RAMP_SECONDS = 5  # a raise of at most half the rate climbs in six steps, a second apart (RAMP)


@dataclass(frozen=True)
class Broker:
    baseline_ms: float
    k_ms: float  # p99 ms per MB/s copied through the broker
    isr_factor: float  # an ISR outside the moves shrinks when p99 > isr_factor x baseline
    data_bytes: int  # the movement's bytes through the broker
    loads: tuple[tuple[int, float], ...]  # (from decision, external load ms), sorted, the first from 0

    def load(self, decision: int) -> float:
        """The external load in the window after `decision`."""
        return [ms for at, ms in self.loads if at <= decision][-1]

    def p99(self, copied_per_s: float, load_ms: float) -> float:
        return self.baseline_ms + self.k_ms * (copied_per_s / MB) + load_ms


@dataclass(frozen=True)
class Window:
    """A decision and the window after it."""
    index: int
    now_ms: int
    hour: int
    throttles: Mapping[int, BrokerThrottle]
    touched: frozenset[int]
    left: Mapping[int, int]  # bytes left after the window
    moved: Mapping[int, int]  # bytes moved in the window


def simulate(brokers: Mapping[int, Broker], bounds: ThrottleBounds, tick_ms: int, decisions: int,
             start_ms: int = 0) -> list[Window]:
    seconds = tick_ms // 1000
    left = {b: m.data_bytes for b, m in brokers.items()}
    shrinks: dict[int, list[int]] = {b: [] for b in brokers}
    recent: dict[int, tuple[float, ...]] = {b: () for b in brokers}  # the windows before, oldest first
    throttles: dict[int, BrokerThrottle] = {}
    signals: dict[int, BrokerSignal] = {}
    history = []
    for i in range(decisions):
        now = start_ms + i * tick_ms
        hour = (now // HOUR_MS) % 24
        touched = frozenset(b for b in brokers if left[b] > 0)
        throttles = dict(decide_throttles(throttles, touched, signals, bounds, now, hour).throttles)
        signals, moved = {}, {}
        for b in sorted(touched):
            model, throttle = brokers[b], throttles.get(b)
            moved[b] = min(left[b], (throttle.rate if throttle else 0) * seconds)
            left[b] -= moved[b]
            per_s = moved[b] / seconds
            p99 = model.p99(per_s, model.load(i))
            if p99 > model.isr_factor * model.baseline_ms:
                shrinks[b].append(now + tick_ms // 2)
            since = throttle.changed_ms if throttle else now
            signals[b] = BrokerSignal(b, p99, model.baseline_ms, sum(1 for at in shrinks[b] if at >= since),
                                      is_saturated(per_s, throttle), earlier_p99s=recent[b])
            recent[b] = (recent[b] + (p99,))[-(RECENT_WINDOWS - 1):]
        history.append(Window(i, now, hour, throttles, touched, dict(left), moved))
    return history


def slo_ms(model: Broker, bounds: ThrottleBounds) -> float:
    return min(bounds.slo_factor * model.baseline_ms, bounds.slo_ceiling_ms)


def line_ms(model: Broker, bounds: ThrottleBounds) -> float:
    """The raise line: `raise_share` of the way from the baseline to the SLO."""
    slo = slo_ms(model, bounds)
    return min(slo, model.baseline_ms + bounds.raise_share * (slo - model.baseline_ms))


def healthy(model: Broker, bounds: ThrottleBounds, rate: int, load_ms: float, limit=slo_ms) -> bool:
    """A window copying at `rate` (saturated) is within the SLO (`limit`: or the raise line) and
    shrinks no ISR."""
    p99 = model.p99(float(rate), load_ms)
    return p99 <= limit(model, bounds) and p99 <= model.isr_factor * model.baseline_ms


def highest_healthy(model: Broker, bounds: ThrottleBounds, load_ms: float, limit=slo_ms) -> int:
    """R (or, with `limit=line_ms`, U): the highest rate in [0, max] with a healthy window (below
    the raise line); p99 grows with the rate; -1: none."""
    low, high = -1, bounds.maximum
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if healthy(model, bounds, middle, load_ms, limit) else (low, middle - 1)
    return low


def chain(rate: int, target: int, bounds: ThrottleBounds) -> int:
    """The decreases that bring `rate` to `target` (>= the floor) or below."""
    cuts = 0
    while rate > target:
        rate, cuts = max(bounds.floor, int(rate * bounds.decrease)), cuts + 1
    return cuts


def climb(rate: int, target: int, bounds: ThrottleBounds) -> int:
    """The raises (r -> r + min(increase, max(1, int(r / 2)))) that bring `rate` to `target` or above."""
    raises = 0
    while rate < target:
        rate, raises = rate + min(bounds.increase, max(1, int(rate * 0.5))), raises + 1
    return raises


def hold_decisions(bounds: ThrottleBounds, tick_ms: int) -> int:
    return max(1, -(-bounds.hold_ms // tick_ms))


@st.composite
def loops(draw, hold_ticks: int = 6, span: int = 300 * MB):
    """(bounds, tick_ms): min < max, a hold of up to `hold_ticks` decisions."""
    floor = draw(st.integers(10_000, 20 * MB))
    maximum = floor + draw(st.integers(1, span))
    tick_ms = 1000 * draw(st.integers(1, 30))
    bounds = ThrottleBounds(
        floor, maximum, draw(st.integers(floor, maximum)),
        increase=max(1, (maximum - floor) // draw(st.integers(1, 30))),
        max_moves=draw(st.integers(1, 10)), decrease=draw(st.floats(0.3, 0.8)), slo_factor=draw(st.floats(1.2, 4.0)),
        slo_ceiling_ms=draw(st.floats(20.0, 2000.0)), hold_ms=draw(st.integers(0, hold_ticks * tick_ms)))
    return bounds, tick_ms


@st.composite
def broker_models(draw, bounds: ThrottleBounds, data: st.SearchStrategy, later: st.SearchStrategy = st.just(()),
                  first_share: st.SearchStrategy = st.floats(0.0, 1.05),
                  point_share: st.SearchStrategy = st.floats(-0.1, 1.2)):
    """A broker whose windows turn unhealthy (over the SLO or shrinking an ISR) under its first load
    at a rate drawn around [min, max], k following from it; the loads are shares of the room
    between baseline and that limit; `later`: (decision, share) steps."""
    baseline, isr_factor = draw(st.floats(1.0, 100.0)), draw(st.floats(1.2, 10.0))
    room = max(1.0, min(bounds.slo_factor * baseline, bounds.slo_ceiling_ms, isr_factor * baseline) - baseline)
    first = draw(first_share) * room
    point = max(1_000.0, bounds.floor + draw(point_share) * (bounds.maximum - bounds.floor))
    k_ms = max(room - first, 0.01) / (point / MB)
    steps = tuple(sorted((at, share * room) for at, share in draw(later)))
    return Broker(baseline, k_ms, isr_factor, draw(data), ((0, first), *steps))


@st.composite
def finite_movements(draw):
    """(bounds with a schedule, tick_ms, brokers with finite data and stepping loads, start_ms)."""
    bounds, tick_ms = draw(loops())
    rates = st.integers(1, bounds.maximum + bounds.maximum // 5)
    bounds = ThrottleBounds(**{**bounds.__dict__,
                               "schedule": Schedule(draw(st.dictionaries(st.integers(0, 23), rates, max_size=24)))})
    at_floor = bounds.floor * (tick_ms // 1000)
    windows = draw(st.integers(1, 200))
    steps = st.lists(st.tuples(st.integers(1, 200), st.floats(0.0, 3.0)), max_size=4)
    brokers = draw(st.dictionaries(st.integers(0, 5), broker_models(bounds, st.integers(1, windows * at_floor), steps),
                                   min_size=1, max_size=3))
    return bounds, tick_ms, brokers, draw(st.integers(0, 24 * HOUR_MS - 1))


@settings(max_examples=200)
@given(finite_movements())
def test_1_rates_and_moves_stay_within_the_bounds_and_the_schedule(setup):
    bounds, tick_ms, brokers, start_ms = setup
    history = simulate(brokers, bounds, tick_ms, 300, start_ms)
    hours = {w.hour for w in history}
    event(f"hours crossed: {min(len(hours), 3)}, scheduled: {bool(hours & set(bounds.schedule.rates))}")
    for w in history:
        assert set(w.throttles) == w.touched
        ceiling = max(bounds.floor, min(bounds.maximum, bounds.schedule.rates.get(w.hour, bounds.maximum)))
        for b, throttle in w.throttles.items():
            assert bounds.floor <= throttle.rate <= ceiling, (w.index, w.hour, b, throttle, ceiling)
            assert 1 <= throttle.moves <= bounds.max_moves, (w.index, b, throttle)


ENDLESS = st.just(2 ** 62)  # bytes: the copies never run out


@st.composite
def steady_loads(draw, stepping: bool):
    """(bounds, tick_ms, brokers, s): data that never runs out, the load constant from decision s
    (0, or a step up or down at s when `stepping`)."""
    bounds, tick_ms = draw(loops())
    s = draw(st.integers(1, 40)) if stepping else 0
    later = st.tuples(st.just(s), st.floats(0.0, 1.5)).map(lambda step: (step,)) if stepping else st.just(())
    brokers = draw(st.dictionaries(st.integers(0, 5), broker_models(bounds, ENDLESS, later), min_size=1, max_size=3))
    return bounds, tick_ms, brokers, s


def check_convergence(bounds: ThrottleBounds, tick_ms: int, brokers: Mapping[int, Broker], s: int) -> None:
    """Property 2 from decision s, the load constant from there on."""
    h = hold_decisions(bounds, tick_ms)
    late = max(0, HURT_WINDOWS - h)  # a run's first cut waits for its second window over the SLO
    # A raise's ramp climbs for up to RAMP_SECONDS after its decision, and the next raise comes
    # at the decision after it ends at the earliest (RAMP).
    pace = max(h, -(-RAMP_SECONDS * 1000 // tick_ms) + 1)
    plans = {}
    for b, model in brokers.items():
        top = highest_healthy(model, bounds, model.loads[-1][1])
        up = highest_healthy(model, bounds, model.loads[-1][1], line_ms)
        if up >= bounds.maximum:
            lo = hi = bounds.maximum
            event("pinned at max")
        elif top < bounds.floor:
            lo = hi = bounds.floor
            event("pinned at min")
        else:
            # Cuts land at int((R + 1) x decrease) or higher, raises stop past U; a rate in (U, R]
            # is held, so [lo, hi] is the sawtooth when U + increase > R, one rate in it when not.
            lo = max(bounds.floor, min(int((top + 1) * bounds.decrease), up + 1))
            hi = min(bounds.maximum, max(top, up + bounds.increase))
            event("settles in the band" if up + bounds.increase <= top else "sawtooth")
        # A change every h decisions after s at the latest: cuts while over R (one more for a shrink
        # counted from before s), then raises from as low as min to lo; both land in [lo, hi].
        settle = s + pace * (chain(bounds.maximum, bounds.floor, bounds) + 1 + climb(bounds.floor, lo, bounds)) + late
        cuts = chain(hi, max(top, bounds.floor), bounds)
        plans[b] = (top, up, lo, hi, settle, h * cuts + late, pace * (cuts + climb(lo, hi, bounds) + 2) + late)
    decisions = max(plan[4] + 3 * plan[6] for plan in plans.values()) + 1
    history = simulate(brokers, bounds, tick_ms, decisions)
    seconds = tick_ms // 1000
    for b, (top, up, lo, hi, settle, over_run, _cycle) in plans.items():
        decided = [w.index for w, v in zip(history[1:], history) if w.throttles[b].changed_ms != v.throttles[b].changed_ms]
        assert all(j - i >= h for i, j in zip(decided, decided[1:])), (b, h, decided)
        rates = [w.throttles[b].rate for w in history[settle:]]
        assert all(lo <= r <= hi for r in rates), (b, top, lo, hi, settle, [r for r in rates if not lo <= r <= hi][:5])
        for v, w in zip(history[settle:], history[settle + 1:]):
            before, after, now = v.throttles[b], w.throttles[b], w.throttles[b].changed_ms == w.now_ms
            if after.rate > before.rate and now:  # a raise, its ramp's first step (RAMP)
                step = min(bounds.increase, max(1, int(before.rate * 0.5)))  # at most half the rate (RULE)
                assert before.rate <= up and aimed(after) == min(bounds.maximum, before.rate + step), (b, before, after)
            elif after.rate > before.rate:  # the ramp goes on, to the raise's target
                assert before.target > 0 and after.rate <= before.target, (b, before, after)
            elif after.rate < before.rate:  # a cut, from what the copies used when that was lower
                used = min(before.rate, v.moved[b] // seconds)
                assert now and before.rate > top and after.rate == max(bounds.floor, int(used * bounds.decrease)), \
                    (b, before, after, used)
        if bounds.floor <= top < bounds.maximum:
            runs = [(over, len(list(group))) for over, group in itertools.groupby(r > top for r in rates)]
            assert all(n <= over_run for over, n in runs if over), (b, top, over_run, runs)
            assert all(n >= h for over, n in runs[1:-1] if not over), (b, h, runs)
        if bounds.floor <= up and up + bounds.increase <= top:
            # The band is wider than a step: once settled the SLO is never crossed, nothing is cut.
            assert all(r <= top for r in rates) and rates == sorted(rates), (b, up, top, rates[:10])


@settings(max_examples=150)
@given(steady_loads(stepping=False))
def test_2_with_a_constant_load_the_rate_converges_to_the_aimd_sawtooth_around_the_slo(setup):
    check_convergence(*setup)


STUCK_AT_THE_FLOOR = (
    ThrottleBounds(floor=1 * MB, maximum=2 * MB, initial=1 * MB, increase=1 * MB, max_moves=1, hold_ms=30_000), 10_000,
    {0: Broker(baseline_ms=2.0, k_ms=0.1, isr_factor=4.0, data_bytes=2 ** 62, loads=((0, 100.0), (1, 0.0)))}, 1)


@settings(max_examples=150)
@example(STUCK_AT_THE_FLOOR)
@given(steady_loads(stepping=True))
def test_2b_after_a_load_step_up_or_down_the_rate_converges_again(setup):
    check_convergence(*setup)


@st.composite
def load_steps(draw):
    """(bounds, tick_ms, brokers at a constant load that leaves room for copies, s, how far the
    step breaks the SLO: a share of the p99 the copies add at the rate in force)."""
    bounds, tick_ms = draw(loops())
    models = broker_models(bounds, ENDLESS, first_share=st.floats(0.0, 0.5), point_share=st.floats(0.2, 1.2))
    brokers = draw(st.dictionaries(st.integers(0, 5), models, min_size=1, max_size=3))
    return bounds, tick_ms, brokers, draw(st.integers(0, 60)), draw(st.floats(0.0, 1.0))


@settings(max_examples=200)
@given(load_steps())
def test_3_a_load_step_that_breaks_the_slo_is_met_within_a_hold(setup):
    bounds, tick_ms, brokers, s, share = setup
    h = hold_decisions(bounds, tick_ms)
    before = simulate(brokers, bounds, tick_ms, s + 1)[s].throttles
    stepped, plans = {}, {}
    for b, model in brokers.items():
        # The load that puts the window at the rate in force over the SLO by `share` of what its copies add.
        rate, first = before[b].rate, model.loads[0][1]
        excess = max(0.01, share * model.k_ms * rate / MB)
        after = first + max(0.0, slo_ms(model, bounds) - model.p99(float(rate), first)) + excess
        stepped[b] = Broker(model.baseline_ms, model.k_ms, model.isr_factor, model.data_bytes, ((0, first), (s, after)))
        assert not healthy(stepped[b], bounds, rate, after)
        top = highest_healthy(stepped[b], bounds, after)
        back = h * chain(rate, top if top >= bounds.floor else bounds.floor, bounds) + max(0, HURT_WINDOWS - h)
        event("at min before the step" if rate == bounds.floor else "back within the SLO" if top >= bounds.floor
              else "lowered to min: the SLO needs less")
        plans[b] = (rate, top, back)
    first = max(h, HURT_WINDOWS)  # the step's second window over the SLO is read at decision s + 2
    history = simulate(stepped, bounds, tick_ms, s + max(max(first, back) for _, _, back in plans.values()) + 2)
    for b, (rate, top, back) in plans.items():
        rates = [w.throttles[b].rate for w in history]
        if rate > bounds.floor:
            assert min(rates[s + 1:s + first + 1]) < rate, (b, rate, h, rates[s:s + first + 1])
        if top >= bounds.floor:
            # By s + back at the latest; an ISR shrink can cut before the second window over
            # the SLO, and a short hold can raise again once the rate is there.
            assert min(rates[s + 1:s + back + 1]) <= top, (b, rate, top, back, rates[s:s + back + 1])
        else:
            assert all(r == bounds.floor for r in rates[s + back:]), (b, rate, back, rates[s:])


@settings(max_examples=200)
@given(finite_movements())
def test_4_a_movement_is_never_starved_and_ends(setup):
    bounds, tick_ms, brokers, start_ms = setup
    at_floor = bounds.floor * (tick_ms // 1000)
    windows = max(math.ceil(m.data_bytes / at_floor) for m in brokers.values())
    history = simulate(brokers, bounds, tick_ms, windows + 1, start_ms)
    for w in history:
        for b in w.touched:
            assert w.throttles[b].rate >= bounds.floor, (w.index, b, w.throttles[b])
            assert w.moved[b] >= min(w.left[b] + w.moved[b], at_floor), (w.index, b, w.moved[b], w.left[b])
    assert not history[-1].touched and all(left == 0 for left in history[-1].left.values()), history[-1].left
