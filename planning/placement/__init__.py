"""Placement: where every replica should live, with the fewest moves (docs/design.md, "The planner").

`placer.plan_placement` is the entry point (the goal is `goal.Goal`). In the order it uses them:
`replica_fates` decides what stays and what must leave; `cluster_quotas` (stage A) and `quotas`
give each broker its share of every topic; `topic_replicas` places one topic greedily, with
`partition_work` (its working copy) and `quota_repairs` (re-pointing towards the quotas);
`exact_placement` places a topic or the whole cluster by an exact flow (`topic_flow`, `flows`)
when the greedy misses; `leadership` orders each replica set so leadership is spread;
`log_dir_choice` picks the dir of every new replica under the disk limit; `lower_bound` and
`plan_summary` say how good the plan is. `racks` reads the `/dc/rack/host` tree.
"""
