"""The status server's Prometheus samples, from the status view as it is when scraped: gauges of
the controller state, and the alert and executor-error counts the server's reader took from the
alerts and command-results topics. Names and help are `runtime.metrics.STATUS_METRICS`'. The
progress gauges are the movement's meter's (`views.progress`), as the page and `status` show
them. Pure.
"""

from __future__ import annotations

from typing import Mapping

from schemas import ALERT_KINDS
from reassigner.operator.views.status import StatusView

Samples = dict[str, list[tuple[tuple[str, ...], float]]]


def compute_metric_samples(view: StatusView | None, alert_counts: Mapping[str, int],
                           errors_by_code: Mapping[str, int]) -> Samples:
    """The status server's samples (`runtime.metrics.STATUS_METRICS`: name → (label values,
    value)); a gauge whose value is unknown is left out."""
    samples: Samples = {
        "reassigner_steps_in_flight": [((), len(view.in_flight) if view else 0)],
        "reassigner_reassignments_active": [((), len(view.reassignments) if view else 0)],
        "reassigner_progress_ratio": [((), (view.movement.fraction or 0.0) if view else 0.0)],
        "reassigner_bytes_to_move": [((), view.movement.bytes_to_move if view else 0)],
        "reassigner_bytes_left": [((), view.movement.bytes_left if view else 0)],
        "reassigner_pipeline_last_batch": [((), view.last_batch if view else -1)],
        "reassigner_alerts": [((kind,), alert_counts.get(kind, 0))
                              for kind in sorted(set(ALERT_KINDS) | set(alert_counts))],
        "reassigner_executor_errors": [((), sum(errors_by_code.values()))],
        "reassigner_executor_errors_by_code": [((code,), n) for code, n in sorted(errors_by_code.items())],
    }
    if view and view.progress.rate_bytes_per_second is not None:
        samples["reassigner_replication_rate_bytes_per_second"] = [((), view.progress.rate_bytes_per_second)]
    if view and view.movement.time_left_seconds is not None:
        samples["reassigner_time_left_seconds"] = [((), view.movement.time_left_seconds)]
    if view:
        alive = sum(1 for b in view.brokers if b.alive)
        samples["reassigner_brokers"] = [(("alive",), alive), (("down",), len(view.brokers) - alive),
                                         (("draining",), sum(1 for b in view.brokers if b.draining))]
        samples["reassigner_under_replicated_partitions"] = [((), len(view.under_replicated))]
        samples["reassigner_under_min_isr_partitions"] = [((), len(view.under_min_isr))]
        samples["reassigner_offline_partitions"] = [((), len(view.offline))]
        samples["reassigner_log_dir_moves"] = [((state,), sum(1 for m in view.log_dir_moves if m.state == state))
                                               for state in ("waiting", "copying", "cancelling")]
        samples["reassigner_log_dir_move_bytes"] = [((), sum(m.size_bytes for m in view.log_dir_moves))]
        samples["reassigner_log_dir_bytes"] = [((str(b.id), path), size) for b in view.brokers
                                               for path, _count, size in b.dirs if size is not None]
        samples["reassigner_broker_isr_shrinks"] = [((str(b.id),), b.isr_shrinks) for b in view.brokers]
        samples["reassigner_broker_throttle_rate_bytes_per_second"] = [
            ((str(b.id),), b.throttle_rate) for b in view.brokers if b.throttle_rate is not None]
        samples["reassigner_broker_canary_p99_ms"] = [
            ((str(b.id),), b.canary_p99_ms) for b in view.brokers if b.canary_p99_ms is not None]
        samples["reassigner_broker_canary_baseline_ms"] = [
            ((str(b.id),), b.canary_baseline_ms) for b in view.brokers if b.canary_baseline_ms is not None]
        if view.traffic_measured:
            samples["reassigner_broker_bytes_in_per_second"] = [((str(b.id),), b.bytes_in_per_sec)
                                                                for b in view.brokers]
            samples["reassigner_broker_network_out_bytes_per_second"] = [((str(b.id),), b.network_out_per_sec)
                                                                         for b in view.brokers]
    return samples
