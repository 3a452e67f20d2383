"""The local real stack: Kafka (KRaft) from Maven jars, Redis from Debian, on loopback."""

import os

DEFAULT_RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1")
"""The racks of the local stack's brokers, in turn (also `reassigner local up --racks`'s default:
here, so that the command line names them without loading the stack)."""

MACHINE_DISK_SETTINGS = {
    "REASSIGNER_DISK_MAX_USAGE_PERCENT": "100",
    "REASSIGNER_DISK_HIGH_WATER_PERCENT": "100",
    "REASSIGNER_DISK_LOW_WATER_PERCENT": "100",
}
"""The product's disk marks for a run on the local stack (the demo, the tests, the benchmarks):
off. Its brokers keep their dirs on this machine's disk, shared with everything else on it, so
how full that disk is says nothing of the stack's data; with the default marks a machine whose
disk was past 75 % got plans that put no replica anywhere (a CI machine's heals and added
brokers). A test of the marks mounts volumes of its own and sets them."""


def adopt_machine_disk_settings() -> None:
    """`MACHINE_DISK_SETTINGS` into this process's environment, each where it is not set already:
    settings loaded afterwards, here and in the processes started from here, read them."""
    for key, value in MACHINE_DISK_SETTINGS.items():
        os.environ.setdefault(key, value)
