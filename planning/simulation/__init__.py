"""Simulation: an in-process Kafka cluster that runs plans under the same movement decision, and
the one checker of the SPEC 6 safety invariants."""
