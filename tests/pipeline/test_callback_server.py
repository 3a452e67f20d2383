"""py4j's callback server starts with the Spark session, on a descriptor select() can watch
(regression: started at the first foreachBatch of a test run holding 1,900 sockets, its accept
thread died and the pipeline test's query.stop() hung for good)."""

from __future__ import annotations

import pytest

from streams.spark_session import SELECT_LIMIT, compute_callback_server_problem


def test_a_descriptor_select_can_watch_is_no_problem_and_one_past_it_is_named():
    assert compute_callback_server_problem(3) is None
    assert compute_callback_server_problem(SELECT_LIMIT - 1) is None
    problem = compute_callback_server_problem(SELECT_LIMIT)
    assert problem is not None and "file descriptor 1024" in problem and "select()" in problem


@pytest.mark.spark
def test_the_session_has_its_callback_server_running_before_any_query(spark):
    server = spark.sparkContext._gateway._callback_server
    assert server is not None and server.server_socket.fileno() < SELECT_LIMIT
    assert server.thread.is_alive(), "the callback server's accept thread runs"
