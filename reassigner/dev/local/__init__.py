"""The local real stack: Kafka (KRaft) from Maven jars, Redis from Debian, on loopback."""

DEFAULT_RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1")
"""The racks of the local stack's brokers, in turn (also `reassigner local up --racks`'s default:
here, so that the command line names them without loading the stack)."""
