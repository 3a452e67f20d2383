"""`status`, its JSON, the page's data and `/metrics` show each broker's ISR shrinks outside the
moves over the last ten minutes (`ControllerState.isr_shrinks`, `planning.movement.isr_shrinks`)."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from planning.model import Broker, Cluster, PartitionState, Topic
from planning.movement.isr_shrinks import WINDOW_MS
from reassigner.operator.status_page import STATUS_PAGE_HTML
from reassigner.operator.tables import print_status
from reassigner.operator.views import compute_status, status_to_json
from reassigner.operator.views.metrics import compute_metric_samples
from state.model import ControllerState

T0 = 1_800_000_000_000
STATE = ControllerState(
    cluster=Cluster(tuple(Broker(b) for b in (1, 2, 3)), (Topic("t", (PartitionState("t", 0, (1, 2, 3), (1, 2, 3), 1),)),)),
    isr_shrinks={2: ((T0, 3, T0 + 9_000), (T0 + 60_000, 1, T0 + 60_000))})


def test_each_broker_shows_its_shrinks_of_the_last_ten_minutes():
    view = compute_status(STATE, 1, (T0 + 90_000) / 1000)
    assert [b.isr_shrinks for b in view.brokers] == [0, 4, 0]
    assert [b["isr_shrinks"] for b in status_to_json(view)["brokers"]] == [0, 4, 0]
    console = Console(width=250, record=True)
    print_status(view, console)
    text = console.export_text()
    assert text.count("ISR shrinks in 10 min") == 1 and "(4 ISR shrinks in 10 min)" in text
    assert "b.isr_shrinks" in STATUS_PAGE_HTML  # the page renders the same field
    samples = dict(compute_metric_samples(view, {}, {})["reassigner_broker_isr_shrinks"])
    assert samples == {("1",): 0, ("2",): 4, ("3",): 0}
    # Read later, the old buckets fall out of the count; with no clock, as of the newest bucket.
    assert [b.isr_shrinks for b in compute_status(STATE, 1, (T0 + WINDOW_MS + 60_000) / 1000).brokers] == [0, 1, 0]
    assert [b.isr_shrinks for b in compute_status(STATE, 1).brokers] == [0, 4, 0]
    assert [b.isr_shrinks for b in compute_status(replace(STATE, isr_shrinks={}), 1).brokers] == [0, 0, 0]
