"""The status page in headless Chromium at 1400 × 1000 (issue 19 item 7), over the real status
server fed a hand-built state (no Kafka, no Redis: what the store would load): 15 partitions
moving, 12 of them finished (counted in the state's replication meter); a proposal; an alert
with a long unbroken message. Checks the screenshot was made, the rendered DOM shows the
overall bar counting the finished partitions, bytes, the ETA and the proposal's buttons, and
that nothing is wider than the window. `make install` installs chromium (Debian's package);
without it the test is skipped. Marked slow: a real browser, about 10 s."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from planning.model import TopicPartition
from planning.movement.eta import ReplicationMeter, add_finished_work, compute_finished_work
from reassigner.operator.status_server import StatusServer
from reassigner.operator.status_sources import AlertBook, StateCache
from reassigner.operator.views import compute_status
from state.model import ControllerState, Proposal
from test_status_progress import movement_state

SCREENSHOT = Path("/tmp/reassigner-operator-screenshots/status-page-1400.png")
LONG = "log dir /var/lib/kafka/" + "x" * 300 + " of broker 3 is offline; " + "details " * 60


def state() -> ControllerState:
    """15 partitions moving, 12 of them finished (counted in the meter, as the pipeline does),
    2 of the 3 left mid-step."""
    moving = movement_state(15, in_flight=2)
    steps = compute_status(moving, 1).reassignments[-1].steps_estimated
    ended = [replace(r, steps_done=steps) for tp, r in moving.reassignments.items() if tp.partition not in (0, 1, 14)]
    meter = add_finished_work(ReplicationMeter(since_ms=0, bytes_copied=120 << 20),
                              compute_finished_work(ended, moving.cluster))
    return ControllerState(
        cluster=moving.cluster, replication_meter=meter,
        reassignments={tp: r for tp, r in moving.reassignments.items() if tp.partition in (0, 1, 14)},
        proposals={"p-42": Proposal("p-42", {TopicPartition("orders", 5): (4, 2, 3)}, "broker 4 added", 0)})


@pytest.fixture()
def site():
    book = AlertBook()
    book.add_alert({"id": "a-1", "event_time": 0, "severity": "CRITICAL", "kind": "DiskFailed",
                    "subject": "broker-3", "message": LONG, "details": {}})
    server = StatusServer(host="127.0.0.1", port=0, cluster_name="c", cache=StateCache(state, ttl=0.0),
                          book=book, default_replica_movements=1, clock=lambda: 60.0).start()
    yield f"http://127.0.0.1:{server.port}/"  # started mid-movement: the state alone has it whole
    server.stop()


@pytest.mark.slow
def test_status_page_at_1400_px(site, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (make install installs it)")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000",
              "--virtual-time-budget=4000"]
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    shot = subprocess.run(common + [f"--screenshot={SCREENSHOT}", site], capture_output=True, text=True, timeout=120)
    assert SCREENSHOT.exists() and SCREENSHOT.stat().st_size > 10_000, shot.stderr[-2000:]
    dom = subprocess.run(common + ["--dump-dom", site], capture_output=True, text=True, timeout=120).stdout
    assert "12 of 15 partitions and" in dom, dom[-3000:]  # counts beside the one percentage (by bytes)
    assert re.search(r'<span id="overall-bytes">125\.8 MB of 157\.3 MB</span>', dom), dom[-3000:]
    # 30 MiB left at 2 MiB/s, one pipe: the header is the last row (the page counts 1 MB = 10^6 B)
    assert re.search(r'<span id="overall-eta">15 s</span>', dom)
    assert "80%" in dom and "1.0 MB/s" in dom  # the bar; a running step's share of the rate
    assert 'data-proposal="p-42" data-verb="approve"' in dom and "broker 4 added" in dom
    assert "/data/a" in dom and "75%" in dom  # disk usage per broker and dir
    widths = re.search(r'data-scroll-width="(\d+)" data-window-width="(\d+)"', dom)
    assert widths, "the page did not measure itself"
    assert int(widths[1]) <= int(widths[2]) == 1400, widths.group(0)
    print(f"screenshot: {SCREENSHOT}")
