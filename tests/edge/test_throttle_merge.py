"""The executor's throttle rules, computed without Kafka (`reassigner.edge.throttles`): a step's
throttle is derived from the step, merged with what others set, and a clear removes only what
the product set — for steps issued before it (issue 19 item 1)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reassigner.edge.throttles import (
    ThrottleChanges,
    compute_adopted,
    compute_set_throttle,
    compute_step_throttle,
    compute_throttle_clear,
    compute_throttle_set,
    compute_wanted,
    parse_entries,
)

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADERS, FOLLOWERS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


class Configs:
    """Kafka's per-broker and per-topic dynamic values plus the executor's ownership records."""

    def __init__(self, rates=None, lists=None):
        self.rates: dict = dict(rates or {})
        self.lists: dict = dict(lists or {})
        self.owned: dict = {}

    def apply(self, changes: ThrottleChanges) -> None:
        self.owned |= changes.record
        for broker, configs in changes.broker_configs.items():
            for name, value in configs.items():
                self._put(self.rates, (broker, name), value)
        for topic, configs in changes.topic_configs.items():
            for name, value in configs.items():
                self._put(self.lists, (topic, name), value)
        for key in changes.forget:
            self.owned.pop(key, None)

    @staticmethod
    def _put(where: dict, key, value) -> None:
        if value is None:
            where.pop(key, None)
        else:
            where[key] = value

    def set(self, wanted) -> ThrottleChanges:
        changes = compute_throttle_set(wanted, self.rates, self.lists, self.owned)
        self.apply(changes)
        return changes

    def clear(self, brokers, topics, sequence) -> ThrottleChanges:
        changes = compute_throttle_clear(brokers, topics, sequence, self.rates, self.lists, self.owned)
        self.apply(changes)
        return changes


def step(rate=100_000, sequence=3, **overrides):
    fields = {"topic": "t", "partition": 0, "target_replicas": [4, 1, 2], "adding": [4], "removing": [3],
              "elect_leader": True, "target_log_dirs": [], "throttle_rate_bytes_per_sec": rate,
              "throttle_log_dir_rate_bytes_per_sec": None, "throttle_sequence": sequence}
    fields |= overrides
    adding = fields["adding"]
    current = [b for b in fields["target_replicas"] if b not in adding] + list(fields["removing"])
    return {"throttle_leader_broker_ids": current, "throttle_follower_broker_ids": list(adding)} | fields


def test_a_step_throttles_its_current_replicas_as_leaders_and_its_new_ones_as_followers():
    wanted = compute_step_throttle(step())
    assert wanted.brokers == [1, 2, 3, 4] and wanted.sequence == 3
    assert wanted.replicas == {("t", LEADERS): ("0:1", "0:2", "0:3"), ("t", FOLLOWERS): ("0:4",)}
    assert set(wanted.rates.values()) == {100_000} and len(wanted.rates) == 8
    assert compute_step_throttle(step(rate=None)) is None
    with_dirs = compute_step_throttle(step(throttle_log_dir_rate_bytes_per_sec=7))
    assert with_dirs.rates[(4, LOG_DIR_RATE)] == 7


def test_nothing_set_before_ours_then_the_clear_leaves_nothing():
    configs = Configs()
    configs.set(compute_step_throttle(step()))
    assert configs.rates[(1, LEADER_RATE)] == "100000" and configs.rates[(4, FOLLOWER_RATE)] == "100000"
    assert configs.lists == {("t", LEADERS): "0:1,0:2,0:3", ("t", FOLLOWERS): "0:4"}
    configs.clear([1, 2, 3, 4], ["t"], 4)
    assert configs.rates == {} and configs.lists == {} and configs.owned == {}


def test_a_rate_another_tool_set_on_a_broker_survives_our_clear():
    """The operator's report: Kafka's --execute set 50 KB/s; the product's clear removed it."""
    configs = Configs({(1, LEADER_RATE): "50000", (1, FOLLOWER_RATE): "50000"},
                      {("t", LEADERS): "5:1", ("u", FOLLOWERS): "0:9"})
    changes = configs.set(compute_step_throttle(step()))
    assert configs.rates[(1, LEADER_RATE)] == "50000", "theirs is stricter than ours: kept, not overwritten"
    assert "broker 1 leader.replication.throttled.rate=50000" in changes.kept
    assert configs.lists[("t", LEADERS)] == "5:1,0:1,0:2,0:3", "merged: their entry kept, first"
    configs.clear([1, 2, 3, 4], ["t", "u"], 4)
    assert configs.rates == {(1, LEADER_RATE): "50000", (1, FOLLOWER_RATE): "50000"}
    assert configs.lists == {("t", LEADERS): "5:1", ("u", FOLLOWERS): "0:9"}


def test_a_looser_rate_of_someone_else_gives_way_to_ours_and_is_restored_after():
    configs = Configs({(2, FOLLOWER_RATE): "10000000"})
    configs.set(compute_step_throttle(step()))
    assert configs.rates[(2, FOLLOWER_RATE)] == "100000", "ours is stricter: in force while we move"
    configs.clear([1, 2, 3, 4], ["t"], 4)
    assert configs.rates == {(2, FOLLOWER_RATE): "10000000"}, "theirs restored, not deleted"


def test_a_value_of_ours_someone_changed_since_is_theirs():
    configs = Configs()
    configs.set(compute_step_throttle(step()))
    configs.rates[(3, LEADER_RATE)] = "777"
    configs.clear([1, 2, 3, 4], ["t"], 4)
    assert configs.rates == {(3, LEADER_RATE): "777"} and configs.owned == {}


def test_a_wildcard_list_already_throttles_everything_and_is_left_alone():
    configs = Configs(lists={("t", FOLLOWERS): "*"})
    configs.set(compute_step_throttle(step()))
    assert configs.lists[("t", FOLLOWERS)] == "*"
    configs.clear([1, 2, 3, 4], ["t"], 4)
    assert configs.lists == {("t", FOLLOWERS): "*"}


def test_a_clear_issued_before_a_step_does_not_remove_that_steps_throttle():
    """The executor reads partitions of the commands topic in any order: a later step (sequence
    5) applied before the clear numbered 5 keeps its throttle; the earlier step's goes."""
    configs = Configs()
    configs.set(compute_step_throttle(step(sequence=2)))
    configs.set(compute_step_throttle(step(sequence=5, partition=1, target_replicas=[7, 1], adding=[7],
                                           removing=[2])))
    configs.clear([1, 2, 3, 4], ["t"], 5)
    assert configs.lists == {("t", LEADERS): "1:1,1:2", ("t", FOLLOWERS): "1:7"}
    assert configs.rates[(1, LEADER_RATE)] == "100000" and configs.rates[(2, LEADER_RATE)] == "100000", \
        "brokers 1 and 2 serve the later step too"
    assert (3, LEADER_RATE) not in configs.rates and (4, FOLLOWER_RATE) not in configs.rates
    configs.clear([1, 2, 7], ["t"], 6)
    assert configs.rates == {} and configs.lists == {}


def test_an_older_pipelines_set_and_clear_follow_the_same_rules():
    configs = Configs({(0, LEADER_RATE): "1"})
    configs.set(compute_wanted([0, 1], 100, None, [
        {"topic": "t", "partition": 0, "leader_broker_ids": [0], "follower_broker_ids": [1]}], 0))
    configs.clear([0, 1], ["t"], None)
    assert configs.rates == {(0, LEADER_RATE): "1"} and configs.lists == {} and configs.owned == {}


def test_entries_are_parsed_as_kafka_writes_them():
    assert parse_entries(" 0:1 ,1:2,,") == ["0:1", "1:2"] and parse_entries("") == parse_entries(None) == []


# --- properties ------------------------------------------------------------------------------

brokers = st.integers(0, 5)
foreign_rates = st.dictionaries(st.tuples(brokers, st.sampled_from([LEADER_RATE, FOLLOWER_RATE])),
                                st.sampled_from(["1", "50000", "100000", "99999999", "not-a-number"]), max_size=6)
entries = st.lists(st.tuples(st.integers(0, 3), brokers).map(lambda e: f"{e[0]}:{e[1]}"), max_size=5, unique=True)
foreign_lists = st.dictionaries(st.tuples(st.sampled_from(["t", "u"]), st.sampled_from([LEADERS, FOLLOWERS])),
                                st.one_of(entries.map(",".join), st.just("*")), max_size=4).map(
    lambda d: {k: v for k, v in d.items() if v})


@st.composite
def steps(draw):
    count = draw(st.integers(1, 4))
    made = []
    for sequence in range(count):
        current = draw(st.lists(brokers, min_size=1, max_size=3, unique=True))
        adding = draw(st.lists(brokers.filter(lambda b: b not in current), max_size=2, unique=True))
        removing = draw(st.lists(st.sampled_from(current), max_size=len(current) - 1, unique=True))
        target = [b for b in current if b not in removing] + adding
        made.append(step(rate=draw(st.sampled_from([100_000, 10_000_000])), sequence=sequence,
                         topic=draw(st.sampled_from(["t", "u"])), partition=draw(st.integers(0, 3)),
                         target_replicas=target, adding=adding, removing=removing))
    return made


@settings(max_examples=300, deadline=None)
@given(foreign_rates, foreign_lists, steps())
def test_set_then_clear_leaves_exactly_what_others_had(rates, lists, made):
    configs = Configs(rates, lists)
    for fields in made:
        configs.set(compute_step_throttle(fields))
    configs.clear(range(6), ["t", "u"], len(made))
    assert configs.rates == rates
    assert {k: parse_entries(v) for k, v in configs.lists.items()} == {k: parse_entries(v) for k, v in lists.items()}
    assert configs.owned == {}


@settings(max_examples=300, deadline=None)
@given(foreign_rates, foreign_lists, steps())
def test_while_steps_move_each_is_throttled_at_most_at_its_rate_and_others_entries_stay(rates, lists, made):
    configs = Configs(rates, lists)
    for fields in made:
        wanted = compute_step_throttle(fields)
        configs.set(wanted)
        again = compute_throttle_set(wanted, configs.rates, configs.lists, configs.owned)
        assert not again.broker_configs and not again.topic_configs and not again.record, "idempotent"
        for (broker, name), want in wanted.rates.items():
            value = configs.rates[(broker, name)]
            assert not value.isdigit() or int(value) <= want
        for (topic, name), needed in wanted.replicas.items():
            present = parse_entries(configs.lists.get((topic, name)))
            assert "*" in present or set(needed) <= set(present)
    for key, value in lists.items():
        before, after = parse_entries(value), parse_entries(configs.lists[key])
        assert after[:len(before)] == before, "others' entries kept, in their order"


@settings(max_examples=200, deadline=None)
@given(foreign_rates, foreign_lists, steps())
def test_a_clear_removes_nothing_a_step_issued_after_it_needs(rates, lists, made):
    configs = Configs(rates, lists)
    for fields in made:
        configs.set(compute_step_throttle(fields))
    last = compute_step_throttle(made[-1])
    configs.clear(range(6), ["t", "u"], last.sequence)
    for (broker, name), want in last.rates.items():
        value = configs.rates.get((broker, name))
        assert value is not None and (not value.isdigit() or int(value) <= want)
    for (topic, name), needed in last.replicas.items():
        present = parse_entries(configs.lists.get((topic, name)))
        assert "*" in present or set(needed) <= set(present)


def step_throttle(partition: int, leaders: list[int], followers: list[int], rate: int, sequence: int):
    return compute_step_throttle({"topic": "t", "partition": partition, "throttle_rate_bytes_per_sec": rate,
                                  "throttle_leader_broker_ids": leaders, "throttle_follower_broker_ids": followers,
                                  "throttle_sequence": sequence})


def test_adoption_takes_what_the_products_steps_set_and_nothing_else():
    steps = [step_throttle(0, [1, 2], [3], 500, 4), step_throttle(1, [2, 3], [4], 500, 7)]
    configs = Configs(rates={(1, LEADER_RATE): "500", (1, FOLLOWER_RATE): "500", (2, LEADER_RATE): "500",
                             (3, FOLLOWER_RATE): "500", (4, LEADER_RATE): "900"},
                      lists={("t", LEADERS): "0:1,0:2,5:5", ("t", FOLLOWERS): "0:3"})
    adopted = compute_adopted(steps, configs.rates, configs.lists)
    assert adopted == {
        f"broker:1:{LEADER_RATE}": {"value": "500", "previous": None, "sequence": 4},
        f"broker:1:{FOLLOWER_RATE}": {"value": "500", "previous": None, "sequence": 4},
        f"broker:2:{LEADER_RATE}": {"value": "500", "previous": None, "sequence": 7},
        f"broker:3:{FOLLOWER_RATE}": {"value": "500", "previous": None, "sequence": 7},
        f"topic:t:{LEADERS}:0:1": {"sequence": 4}, f"topic:t:{LEADERS}:0:2": {"sequence": 4},
        f"topic:t:{FOLLOWERS}:0:3": {"sequence": 4},
    }  # broker 4's 900 and the entry 5:5 are someone else's; 1:2, 1:3 and 1:4 are not in force
    configs.owned = adopted
    configs.apply(compute_throttle_clear([1, 2, 3, 4], ["t"], 8, configs.rates, configs.lists, configs.owned))
    assert configs.rates == {(4, LEADER_RATE): "900"} and configs.lists == {("t", LEADERS): "5:5"}
    assert configs.owned == {}


def test_an_adopted_throttle_of_a_later_step_outlives_an_earlier_clear():
    configs = Configs(rates={(1, LEADER_RATE): "500"}, lists={("t", LEADERS): "2:1"})
    configs.owned = compute_adopted([step_throttle(2, [1], [], 500, 9)], configs.rates, configs.lists)
    configs.apply(compute_throttle_clear([1], ["t"], 6, configs.rates, configs.lists, configs.owned))
    assert configs.rates == {(1, LEADER_RATE): "500"} and configs.lists == {("t", LEADERS): "2:1"}


def test_a_step_carries_its_own_rate_per_broker_and_the_others_get_its_rate():
    wanted = compute_step_throttle(step(rate=50_000, throttle_broker_rates=[
        {"broker_id": 4, "rate_bytes_per_sec": 70_000}, {"broker_id": 9, "rate_bytes_per_sec": 1}]))
    assert wanted.rates[(4, FOLLOWER_RATE)] == wanted.rates[(4, LEADER_RATE)] == 70_000
    assert {wanted.rates[(b, LEADER_RATE)] for b in (1, 2, 3)} == {50_000}
    assert (9, LEADER_RATE) not in wanted.rates, "a rate for a broker the step does not touch sets nothing"


def test_a_set_throttle_of_schema_set_12_sets_each_brokers_rate_with_its_sequence():
    wanted = compute_set_throttle({"broker_ids": [1, 2], "rate_bytes_per_sec": 10, "logdir_rate_bytes_per_sec": None,
                                   "partitions": [], "throttle_sequence": 8,
                                   "broker_rates": [{"broker_id": 2, "rate_bytes_per_sec": 30}]})
    assert wanted.sequence == 8 and wanted.replicas == {}
    assert (wanted.rates[(1, LEADER_RATE)], wanted.rates[(2, FOLLOWER_RATE)]) == (10, 30)
    older = compute_set_throttle({"broker_ids": [1], "rate_bytes_per_sec": 10, "partitions": []})
    assert older.sequence == 0 and older.rates[(1, FOLLOWER_RATE)] == 10


def test_an_older_step_applied_after_a_newer_rate_change_keeps_the_newer_rate():
    """Regression (issue 35): the executor reads the commands topic's partitions in any order; a
    step issued before the adaptive throttle lowered broker 4 to 20 KB/s, applied after that
    SetThrottle, put its 100 KB/s back."""
    configs = Configs()
    configs.set(compute_set_throttle({"broker_ids": [4], "rate_bytes_per_sec": 20_000, "partitions": [],
                                      "throttle_sequence": 7}))
    changes = configs.set(compute_step_throttle(step(sequence=5)))
    assert configs.rates[(4, FOLLOWER_RATE)] == "20000" and 4 not in changes.broker_configs
    assert configs.rates[(1, LEADER_RATE)] == "100000", "a broker no newer command set gets the step's rate"
    assert configs.lists[("t", FOLLOWERS)] == "0:4", "the older step's replicas are still throttled"
    configs.set(compute_step_throttle(step(sequence=9, throttle_broker_rates=[
        {"broker_id": 4, "rate_bytes_per_sec": 40_000}])))
    assert configs.rates[(4, FOLLOWER_RATE)] == "40000", "a newer step's rate does apply"
    configs.clear([1, 2, 3, 4], ["t"], 10)
    assert configs.rates == {} and configs.lists == {} and configs.owned == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(brokers, min_size=1, max_size=3, unique=True),
                          st.sampled_from([20_000, 100_000, 7_000_000])), min_size=1, max_size=5),
       st.randoms(use_true_random=False))
def test_in_whatever_order_the_commands_are_applied_each_broker_ends_at_its_newest_rate(commands, random):
    """Rate changes numbered 1..n, applied in a shuffled order, leave each broker at the rate of
    the newest command that named it (no one else's values here), and a clear after them all
    leaves nothing."""
    made = [compute_set_throttle({"broker_ids": ids, "rate_bytes_per_sec": rate, "partitions": [],
                                  "throttle_sequence": number}) for number, (ids, rate) in enumerate(commands, 1)]
    newest = {}
    for wanted in made:
        for (broker, name), rate in wanted.rates.items():
            newest[(broker, name)] = str(rate)
    order = list(made)
    random.shuffle(order)
    configs = Configs()
    for wanted in order:
        configs.set(wanted)
    assert configs.rates == newest
    configs.clear(range(6), [], len(made) + 1)
    assert configs.rates == {} and configs.owned == {}
