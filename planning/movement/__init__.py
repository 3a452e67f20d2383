"""Movement: how a partition gets from its replicas to its target, a bounded step at a time.

`partition_steps` computes one partition's next step (KIP-435); `batches` is the batch rule across
partitions (which steps start now under the limits P, L, R, B); `completion` tells a finished or
stalled step; `cancel` steps a partition back; `reassignment` is the record of one partition's
reassignment; `advance` is the one movement decision that the pipeline and the simulator share.
The rules in prose: docs/design.md, "Incremental steps and the batch rule".
"""
