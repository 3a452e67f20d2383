"""`status`, its JSON and the page name the cluster's Kafka as the snapshots told it, with what
the product lacks there, and count the partitions under min ISR that keep eligible leaders."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from planning.model import Broker, Cluster, KafkaFacts, LogDir, PartitionState, Topic
from reassigner.operator.tables import print_status
from reassigner.operator.views import compute_status, status_to_json
from runtime.kafka_versions import CAPABILITIES, CORDONS, ELIGIBLE_LEADERS, FENCED_BROKERS, LOG_DIR_MOVES
from state.model import ControllerState

PARTITIONS = (PartitionState("t", 0, (1, 2, 3), (1,), 1, eligible_leaders=(2, 3)),
              PartitionState("t", 1, (2, 3, 1), (2,), 2),
              PartitionState("t", 2, (3, 1, 2), (3, 1, 2), 3))
STATE = ControllerState(cluster=Cluster(tuple(Broker(b) for b in (1, 2, 3)),
                                        (Topic("t", PARTITIONS, min_insync_replicas=2),)))


def printed(state: ControllerState) -> str:
    console = Console(width=250, record=True)
    print_status(compute_status(state, 1, 10.0), console)
    return console.export_text()


def test_status_names_the_clusters_kafka_and_what_the_product_does_without_what_it_lacks():
    kafka_3_7 = KafkaFacts("3.7", 19, (LOG_DIR_MOVES,))
    view = compute_status(replace(STATE, kafka=kafka_3_7), 1, 10.0)
    without = {c.name: c.without for c in CAPABILITIES}
    assert view.kafka == ("Kafka 3.7 (metadata.version level 19)"
                          f"; without {FENCED_BROKERS}: {without[FENCED_BROKERS]}"
                          f"; without {ELIGIBLE_LEADERS}: {without[ELIGIBLE_LEADERS]}"
                          f"; without {CORDONS}: {without[CORDONS]}")
    assert status_to_json(view)["kafka"] == view.kafka
    assert f"cluster: Kafka 3.7 (metadata.version level 19); without {FENCED_BROKERS}" in printed(
        replace(STATE, kafka=kafka_3_7))
    everything = KafkaFacts("4.3", 30, tuple(c.name for c in CAPABILITIES))
    assert compute_status(replace(STATE, kafka=everything), 1, 10.0).kafka == "Kafka 4.3 (metadata.version level 30)"


def test_before_a_snapshot_told_it_status_says_nothing_of_kafka():
    view = compute_status(STATE, 1, 10.0)
    assert view.kafka is None and status_to_json(view)["kafka"] is None
    assert "cluster: Kafka" not in printed(STATE)


def test_the_partitions_under_min_isr_that_keep_eligible_leaders_are_counted():
    view = compute_status(STATE, 1, 10.0)
    assert [(p.partition, p.eligible_leaders) for p in view.under_min_isr] == [(0, (2, 3)), (1, ())]
    assert "under min ISR: 2 (1 keep eligible leader replicas) t-0 t-1" in printed(STATE)


def draining(state: ControllerState, broker_id: int) -> ControllerState:
    cluster = state.cluster
    return replace(state, cluster=cluster.with_brokers(
        [replace(b, draining=True) if b.id == broker_id else b for b in cluster.brokers]))


def test_a_drain_on_a_kafka_without_cordons_says_new_topics_may_still_land_there():
    state = draining(replace(STATE, kafka=KafkaFacts("4.1", 27, (LOG_DIR_MOVES, FENCED_BROKERS))), 3)
    view = compute_status(state, 1, 10.0)
    assert view.drain_warning == ("draining broker 3 not cordoned: new topics may still land there "
                                  "(Kafka 4.1 has no cordons (4.3+ with metadata.version 4.3-IV0))")
    assert status_to_json(view)["drain_warning"] == view.drain_warning
    assert "draining broker 3 not cordoned" in printed(state)


def test_a_broker_the_product_cordoned_shows_so_and_warns_of_nothing():
    state = replace(draining(replace(STATE, kafka=KafkaFacts("4.4", 33, tuple(c.name for c in CAPABILITIES))), 3),
                    cordoned={3: ()})
    view = compute_status(state, 1, 10.0)
    assert view.drain_warning is None and [b.cordoned for b in view.brokers] == [False, False, True]
    assert status_to_json(view)["brokers"][2]["cordoned"] is True
    assert "draining, cordoned" in printed(state)


def test_the_dirs_the_product_cordoned_are_named_and_a_failed_cordon_is_not_shown_as_one():
    state = replace(STATE, kafka=KafkaFacts("4.4", 33, tuple(c.name for c in CAPABILITIES)),
                    cordoned={1: ("/data/a", "/data/b"), 2: ("",)})  # broker 2: its cordon command failed
    view = compute_status(state, 1, 10.0)
    assert [(b.cordoned, b.cordoned_dirs) for b in view.brokers] == [
        (False, ("/data/a", "/data/b")), (False, ()), (False, ())]
    assert status_to_json(view)["brokers"][0]["cordoned_dirs"] == ["/data/a", "/data/b"]
    assert "(cordoned: /data/a, /data/b)" in printed(state)


def test_the_dirs_someone_else_cordoned_are_named_apart_from_the_products():
    dirs = lambda *cordoned: tuple(LogDir(p, cordoned=p in cordoned) for p in ("/data/a", "/data/b"))  # noqa: E731
    cluster = Cluster((Broker(1, log_dirs=dirs("/data/a", "/data/b")), Broker(2, log_dirs=dirs("/data/b")),
                       Broker(3, draining=True, log_dirs=dirs("/data/a", "/data/b"))), (Topic("t", PARTITIONS),))
    # The product cordoned /data/a of broker 1 (a full dir it empties) and broker 3 whole (its drain).
    state = replace(STATE, cluster=cluster, kafka=KafkaFacts("4.4", 33, tuple(c.name for c in CAPABILITIES)),
                    cordoned={1: ("/data/a",), 3: ()})
    view = compute_status(state, 1, 10.0)
    assert [(b.cordoned_dirs, b.cordoned_by_others) for b in view.brokers] == [
        (("/data/a",), ("/data/b",)), ((), ("/data/b",)), ((), ())]
    assert [b["cordoned_by_others"] for b in status_to_json(view)["brokers"]] == [["/data/b"], ["/data/b"], []]
    text = printed(state)
    assert "(cordoned: /data/a) (cordoned by others: /data/b)" in text
    assert text.count("cordoned by others") == 2
