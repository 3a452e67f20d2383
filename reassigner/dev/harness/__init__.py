"""The harness the demo and the scenario tests share: `world` (the running product on a real local
cluster, and its scenes), `product` (the product's processes, Kafka probes and topic collectors),
`monitor` (the SPEC 6 invariant monitor over Kafka), `traffic` (sequenced acks=all traffic and
the no-data-loss check), `cluster_tools` (topics, bulk data, slow replication)."""
