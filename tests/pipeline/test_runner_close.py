"""`PipelineRunner.close` gives the process its garbage collection back: after a batch the
runner's heap keeper has frozen the survivors (`runtime.heap`), and a process that goes on
after the pipeline (a test run, an embedding tool) must not keep them frozen. Regression: the
watcher's keeper left the pytest heap frozen and an in-process Spark test after it hung in
`query.stop()`; the runner's keeper had no way to be closed at all. No server needed."""

from __future__ import annotations

import gc

from tests.pipeline.test_signed_commands import runner_with


def test_close_unfreezes_what_the_batches_froze_and_stops_taking_batches():
    assert gc.isenabled()
    runner, _ = runner_with(None)
    try:
        runner.heap.after_batch()  # what every batch ends with
        assert gc.get_freeze_count() > 0
    finally:
        runner.close()
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert runner.stopping  # a batch Spark still delivers is left for the next start
