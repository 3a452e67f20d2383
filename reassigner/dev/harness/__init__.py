"""The harness the demo and the scenario tests share: `world` (the scenes), `stage` (the running
product on a real local cluster, its instruments, and the running of one scene), `product` (the
product's processes, Kafka probes and topic collectors), `monitor` (the invariant monitor over
Kafka: docs/design.md, "Safety invariants"), `traffic` (sequenced acks=all traffic and the
no-data-loss check), `cluster_tools` (topics, bulk data, slow replication)."""
