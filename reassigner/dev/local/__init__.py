"""The local real stack: Kafka (KRaft) from Maven jars, Redis from Debian, on loopback."""
