"""Shared helpers of the operator tests: the real CLI in a subprocess, Avro messages, a webhook."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
import uuid

def cli_args(*args: str) -> list[str]:
    """`python -m reassigner.cli ARGS`: the real entry point, in a subprocess."""
    return [sys.executable, "-m", "reassigner.cli", *args]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cli_args(*args), capture_output=True, text=True, timeout=timeout)


def start_cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen(cli_args(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def unique_prefix(name: str) -> str:
    return f"t{uuid.uuid4().hex[:8]}.{name}"


def alert(alert_id: str, kind: str = "UnderMinIsr", severity: str = "WARNING", subject: str = "orders-3",
          message: str = "orders-3 has 1 in-sync replica, min.insync.replicas is 2") -> dict:
    return {"schema_version": 1, "event_time": int(time.time() * 1000), "id": alert_id, "key": subject,
            "severity": severity, "kind": kind, "subject": subject, "message": message,
            "details": {"isr": "1", "min_isr": "2"}}


def produce(bootstrap: str, topic: str, schema: str, records: list[dict]) -> None:
    from confluent_kafka import Producer

    from schemas.codec import encode, version_headers

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for record in records:
        producer.produce(topic, key=record["key"].encode(), value=encode(schema, record), headers=version_headers())
    assert producer.flush(60) == 0, "produce not acknowledged"


def consume_all(bootstrap: str, topic: str, schema: str, expected: int, timeout: float = 30.0) -> list[dict]:
    from confluent_kafka import Consumer

    from schemas.codec import decode

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    records, deadline = [], time.monotonic() + timeout
    try:
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                records.append(decode(schema, message.value()))
    finally:
        consumer.close()
    return records


class LineReader:
    """Collects a subprocess's stdout/stderr lines in background threads."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self.out, self.err = process, [], []
        for stream, sink in ((process.stdout, self.out), (process.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()

    @staticmethod
    def _pump(stream, sink) -> None:
        for line in stream:
            sink.append(line.rstrip("\n"))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


class Webhook:
    """A local HTTP receiver; answers 500 to alerts whose subject is in `failing_subjects`."""

    def __init__(self, failing_subjects: frozenset[str] = frozenset()) -> None:
        self.received: list[dict] = []
        self.attempts: dict[str, int] = {}
        received, attempts = self.received, self.attempts

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                attempts[body["id"]] = attempts.get(body["id"], 0) + 1
                status = 500 if body["subject"] in failing_subjects else 200
                if status == 200:
                    received.append(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def ids(self) -> set[str]:
        return {body["id"] for body in list(self.received)}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
