"""Simulation: an in-process Kafka cluster (`simulated_cluster`) that runs plans under the same
movement decision (`driver`), and the one checker of the safety invariants (`invariants`)."""

DEFAULT_BYTES_PER_SEC = 100 * 1024 * 1024
"""A simulated broker's replication fetch capacity, shared by the replicas it copies (here, not
in `simulated_cluster`: the command line shows it in its help without loading the simulator)."""
