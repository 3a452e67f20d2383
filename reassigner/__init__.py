"""kafka-reassigner: an event-driven, incremental partition reassignment controller for Kafka."""

__version__ = "0.1.0"
