"""The simulator's public names in one place: the simulated cluster and the driver that runs a plan.

`planning.simulation.simulated_cluster` is the cluster (what the Admin API shows, faults, time);
`planning.simulation.driver` runs a plan's reassignments through it and reports. The shell
(`reassigner simulate`), the benchmarks and the pipeline and handler tests import them from here.
"""

from __future__ import annotations

from planning.model import LogDir
from planning.simulation.driver import (
    CancelReassignments,
    FailLogDir,
    KillBroker,
    RestartBroker,
    RestoreLogDir,
    SimulationEvent,
    SimulationReport,
    cluster_with_brokers,
    run_plan,
)
from planning.simulation.simulated_cluster import SimulatedCluster, SimulationParams

__all__ = [
    "CancelReassignments", "FailLogDir", "KillBroker", "LogDir", "RestartBroker", "RestoreLogDir",
    "SimulatedCluster", "SimulationEvent", "SimulationParams", "SimulationReport", "cluster_with_brokers",
    "run_plan",
]
