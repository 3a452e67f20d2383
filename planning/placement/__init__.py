"""Placement: where every replica should live, with the fewest moves (SPEC 4).

`placer.plan_placement` is the entry point; `topic_replicas` places one topic's partitions,
`quotas` computes each broker's share per rack level, `racks` reads the `/dc/rack/host` tree,
`leadership` orders each replica set so leadership is spread.
"""
