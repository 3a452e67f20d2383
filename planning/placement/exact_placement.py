"""When the exact flows place replicas instead of the greedy: the certificate and the joint model.

THE CERTIFICATE (per topic, `place_exactly_where_quotas_missed`). A topic whose brokers all end
at stage A's quotas, with the fewest moves stage A counted for them (`T - sum min(q, c)`), is
optimal for those quotas: the greedy's placement stands. Otherwise (few brokers per replica,
tight racks) the topic is placed again by the exact per-topic flow
(`planning.placement.topic_flow.plan_topic_exact`, every broker at its quota), and the exact
placement is taken unless the greedy's met the quotas with no more moves. When the flow finds no
placement (the racks, with the replicas that stay, leave none) or is over its budget, the
greedy's stands and the reason is returned for the plan's warnings.

THE JOINT MODEL (`plan_cluster_exact`). A cluster within `JOINT_EXACT_ARCS` is placed by one
exact flow over every topic (`plan_topics_exact`): every replica balanced per topic and over
the cluster with the fewest moves, and those moves are the proven optimum (the plan's bound).
None when the cluster is bigger, a topic is outside stage A, or no balanced rack-spread plan
exists: the per-topic path then plans it and reports what it could not balance.

BUDGETS are counted in flow arcs, never in time, so planning stays deterministic: the same
cluster always gives the same plan. Pure: values in, fresh values out.
"""

from __future__ import annotations

import itertools
from collections import Counter
from types import MappingProxyType
from typing import Mapping

from planning.placement.cluster_quotas import ClusterQuotas
from planning.placement.quotas import TopicQuotas, compute_topic_ranges
from planning.placement.racks import RackTree
from planning.placement.topic_flow import count_topic_flow_arcs, plan_topic_exact, plan_topics_exact
from planning.placement.topic_replicas import TopicReplicas

# The exact per-topic flow runs only where the greedy missed its quotas, within these budgets.
# A 300-partition topic on 200 brokers is 63k arcs.
TOPIC_EXACT_ARCS = 2_000_000
PLAN_EXACT_ARCS = 8_000_000
# Clusters up to this many arcs are placed by one exact flow over every topic (the proven optimum;
# 200 partitions on 7 brokers is 2k arcs, 30k on 33 brokers 1.1M: those take the per-topic path).
JOINT_EXACT_ARCS = 200_000


def place_exactly_where_quotas_missed(tree, work, placed: TopicReplicas, quotas: TopicQuotas,
                                      load_before: Mapping[int, int],
                                      arcs_left: int) -> tuple[TopicReplicas, int, str]:
    """The greedy's placement when it meets every broker's quota (then it is optimal: the moves
    stage A counted), else the exact flow's (`plan_topic_exact`) within the arc budget; the
    budget left; and why the quotas stay missed ("" when they are met)."""
    counts = Counter(b for b in itertools.chain.from_iterable(placed.finals) if b in tree.broker_node)
    kept = Counter(itertools.chain.from_iterable(w.kept for w in work))
    fewest = sum(quotas.broker_quota.values()) - sum(min(q, kept.get(b, 0)) for b, q in quotas.broker_quota.items())
    greedy_moves = count_new_replicas(tree, work, placed.finals)
    meets_quotas = all(counts.get(b, 0) == q for b, q in quotas.broker_quota.items())
    if greedy_moves == fewest and meets_quotas:
        return placed, arcs_left, ""  # certified: stage A's count for these quotas
    arcs = count_topic_flow_arcs(tree, work)
    if arcs > TOPIC_EXACT_ARCS or arcs > arcs_left:
        return placed, arcs_left, (f"the exact placement of this topic ({arcs} arcs) is over its "
                                   f"budget ({min(TOPIC_EXACT_ARCS, arcs_left)} arcs left)")
    finals = plan_topic_exact(tree, work, {b: (q, q) for b, q in quotas.broker_quota.items()})
    if finals is None:  # the quotas are out of the racks' reach for this topic: keep the greedy's
        return placed, arcs_left - arcs, ("the rack rule, with the replicas that stay, leaves no "
                                          "placement that meets every share")
    if meets_quotas and count_new_replicas(tree, work, finals) >= greedy_moves:
        return placed, arcs_left - arcs, ""  # the greedy's was as good (rack repairs cost it)
    load = dict(load_before)
    for w, final in zip(work, finals):
        for b in w.kept:
            load[b] -= 1
        for b in final:
            if b in tree.broker_node:
                load[b] = load.get(b, 0) + 1
    return TopicReplicas(finals, MappingProxyType(load)), arcs_left - arcs, ""


def plan_cluster_exact(tree: RackTree, topic_work, cluster_quotas: ClusterQuotas, ranges_cache: dict):
    """The joint model: every topic in one exact flow, balanced per topic and over the cluster
    with the fewest moves (`plan_topics_exact`), when the cluster fits `JOINT_EXACT_ARCS`; None
    when it does not fit or no balanced rack-spread plan exists (the per-topic path then plans
    it, and reports what it could not balance)."""
    if not tree.broker_node or any(name not in cluster_quotas.quotas for name, _, _ in topic_work):
        return None
    arcs = sum(count_topic_flow_arcs(tree, work) for _, _, work in topic_work)
    if not topic_work or arcs > JOINT_EXACT_ARCS:
        return None
    return plan_topics_exact(
        tree,
        [work for _, _, work in topic_work],
        [compute_topic_ranges(tree, work, ranges_cache) for _, _, work in topic_work],
        cluster_quotas.cluster_ranges,
    )


def count_joint_moves(tree: RackTree, topic_work, joint) -> int:
    """The moves of the joint model's plan: explicit targets' new replicas plus the rest."""
    explicit = sum(len(set(w.replicas) - set(p.replicas))
                   for _, partitions, work in topic_work for p, w in zip(partitions, work) if w.fixed)
    return explicit + sum(count_new_replicas(tree, work, finals) for (_, _, work), finals in zip(topic_work, joint))


def count_new_replicas(tree: RackTree, work, finals) -> int:
    """Replicas placed where they were not allowed to stay (the moves of one topic's plan)."""
    return sum(len(tree.broker_node.keys() & final) - len(w.kept & set(final))
               for w, final in zip(work, finals) if not w.fixed)
