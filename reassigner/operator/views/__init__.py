"""What `list`, `status`, `request show`, the status page and its API show, computed from a
ControllerState. Pure: no clock (`now_seconds` is an argument), no I/O, no client or terminal
library (the import linter holds the whole package to it).

    rows       one line per partition: reassignments (step n of m, why it waits, bytes and time
               left), the batch in flight, the moves of other tools, the log-dir moves
    proposals  a proposal waiting for approval, its moves, and Kafka's reassignment JSON of it
    listing    the list view: the rows and the proposals
    progress   the movement's meter: partitions, steps, bytes, percentage and time left of every
               reassignment and of the whole movement, the one source of every view's figures
    status     the status view: brokers, disks, partition problems, the movement's progress
    documents  the JSON of each view, one function per document, for every door that shows it
    metrics    the status server's Prometheus samples of the status view
    units      sizes and durations as people read them (and the status page's copy of the rule)

The terminal's tables of these views are `reassigner.operator.tables`; the page is
`reassigner.operator.status_page`. The names below are the package's public ones.
"""

from reassigner.operator.views.rows import (ExternalRow, InFlightRow, LogDirMoveRow, ReassignmentRow,
                                            compute_external_rows, compute_in_flight, compute_log_dir_move_rows,
                                            compute_reassignment_rows, compute_waiting_reason, step_label)
from reassigner.operator.views.proposals import (ProposalMoveRow, ProposalView, compute_proposal_view,
                                                 compute_proposal_views, proposal_to_reassignment_json)
from reassigner.operator.views.listing import BrokerChangeRow, ListView, compute_list_view
from reassigner.operator.views.progress import Figures, Progress, compute_meter, compute_progress
from reassigner.operator.views.status import (BrokerRow, DiskRow, PartitionProblem, StatusView, compute_disk_rows,
                                              compute_status)
from reassigner.operator.views.documents import (compute_status_document, list_to_json, progress_to_json,
                                                 proposal_to_json, reassignment_row_to_json, row_to_json,
                                                 status_to_json)

__all__ = [
    "ExternalRow", "InFlightRow", "LogDirMoveRow", "ReassignmentRow", "compute_external_rows", "compute_in_flight",
    "compute_log_dir_move_rows", "compute_reassignment_rows", "compute_waiting_reason", "step_label",
    "ProposalMoveRow", "ProposalView", "compute_proposal_view", "compute_proposal_views",
    "proposal_to_reassignment_json",
    "BrokerChangeRow", "ListView", "compute_list_view",
    "Figures", "Progress", "compute_meter", "compute_progress",
    "BrokerRow", "DiskRow", "PartitionProblem", "StatusView", "compute_disk_rows", "compute_status",
    "compute_status_document", "list_to_json", "progress_to_json", "proposal_to_json",
    "reassignment_row_to_json", "row_to_json", "status_to_json",
]
