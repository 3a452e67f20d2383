"""Simulation: an in-process Kafka cluster (`simulated_cluster`) that runs plans under the same
movement decision (`driver`), and the one checker of the safety invariants (`invariants`)."""
