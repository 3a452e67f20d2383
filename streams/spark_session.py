"""The SparkSession of the pipeline, with Spark's Kafka and Avro connectors from the Maven cache.

Rules:
- connector jars are the ones the operator names (`spark_jars`: paths or URLs, no Maven needed),
  else come from `runtime.clients.jars` (Maven, `spark.jars`), never from Spark's own Ivy
  resolver (`spark.jars.packages`), which ignores Maven's mirrors and settings;
- a jar whose artifact pyspark already ships (scala-library, slf4j, snappy, ...) is left out, so
  the classpath holds one version of each library: the one Spark was built with;
- `PYSPARK_PYTHON` is set to the running interpreter (the project's virtualenv) before the JVM
  starts, or Python workers would start with whatever `python3` is on PATH;
- local mode by default (`local[2]`: this machine has 2 cores); `master` points it at a cluster;
- the session's settings are `compute_spark_conf`'s: in local mode one shuffle partition and a
  parallelism of 2 (micro-batches are small, the machine is), on a cluster Spark's own defaults;
  the operator's settings (`spark_conf`, `run --conf KEY=VALUE`) come last and win;
- py4j's callback server (Spark calls the driver's `foreachBatch` through it) starts with the
  session, not at the first query: it waits for connections with `select()`, which cannot watch a
  descriptor numbered 1024 or above. Started late in a process holding many sockets, its accept
  thread died at once while its socket kept listening, so Spark's first callback and then
  `query.stop()` waited forever. Started here it gets one of the process's first descriptors; a
  high one anyway is refused in one line (`compute_callback_server_problem`);
- Spark's JVM is launched in a session (and so a process group) of its own: a signal to the
  driver's process group (a terminal, a supervisor, `kill -- -PGID`) reaches the driver alone,
  which stops the query after the batch in progress, then Spark. Hadoop's local file system forks
  `chmod` for every checkpoint file it writes (without Hadoop's native library); in the driver's
  group such a `chmod` got the group's SIGTERM now and then, died, and Spark logged the stop as
  "Query terminated with error" with a stack trace. The JVM still dies with the driver: it exits
  when its stdin, a pipe from the driver, closes. Signal dispositions are left as pyspark sets
  them (SIGINT ignored): a JVM launched ignoring SIGTERM, tried before, hands that to every
  process it forks, and Spark and Hadoop end what they fork with SIGTERM (pipelines stalled for
  minutes while it was in place);
- a SIGTERM that reaches Spark's JVM anyway (systemd's default `KillMode=control-group` signals
  every process of the unit; or the JVM alone) runs the driver's stop first
  (`stop_before_spark`): the JVM's shutdown hooks run by priority, and Spark's own, which stops
  the SparkContext under whatever job runs (the driver's batch then failed with a Python
  traceback in Spark's log), comes after a Python hook that lets the batch in progress finish
  and stops the query.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from runtime.clients.jars import ensure_jars
from schemas.errors import PermanentError

log = logging.getLogger(__name__)

SELECT_LIMIT = 1024  # FD_SETSIZE: select() watches descriptors below it only
# Hadoop's ShutdownHookManager runs the JVM's shutdown hooks by priority, highest first; Spark's
# (which stops the SparkContext) has FileSystem's 10 + 30. The driver's stop goes before it, and
# may take as long as a batch in progress needs to finish.
STOP_HOOK_PRIORITY = 100
STOP_HOOK_TIMEOUT_SECONDS = 120

_VERSION_SUFFIX = re.compile(r"-\d[\w.\-]*\.jar$")


def artifact_name(jar: Path) -> str:
    """`kafka-clients-3.9.0.jar` -> `kafka-clients`."""
    return _VERSION_SUFFIX.sub("", jar.name)


def connector_jars(cache_dir: Path) -> list[Path]:
    """The Kafka/Avro connector jars that pyspark does not already ship."""
    import pyspark

    shipped = {artifact_name(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [jar for jar in ensure_jars(cache_dir, "spark") if artifact_name(jar) not in shipped]


def compute_spark_jars(cache_dir: Path, spark_jars: str | None) -> str:
    """The `spark.jars` value: the operator's list as given, else the Maven-cached connectors."""
    if spark_jars:
        return ",".join(part.strip() for part in spark_jars.split(",") if part.strip())
    return ",".join(str(j) for j in connector_jars(cache_dir))


SECRET_OPTION_PATTERN = r"(?i)secret|password|token|access[.]key|jaas|ssl[.]keystore[.]key|url"


def compute_spark_conf(master: str, *overrides: Mapping[str, str]) -> dict[str, str]:
    """The settings the session is built with, besides the jars (see the module rules)."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
        # A deep plan string can overflow the default stack in Spark's regex-based redaction.
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=WARN -Xss16m",
        "spark.python.worker.reuse": "true",
        # The Kafka options carry secrets under names Spark's default patterns miss
        # (`kafka.sasl.jaas.config`, an inline `kafka.ssl.keystore.key`): redacted in plans,
        # explain output, the environment and failure dumps.
        "spark.redaction.regex": SECRET_OPTION_PATTERN,
        "spark.sql.redaction.options.regex": SECRET_OPTION_PATTERN,
    }
    if master.startswith("local"):
        conf |= {"spark.sql.shuffle.partitions": "1",  # micro-batches are small: one reduce task
                 "spark.default.parallelism": "2",
                 "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    for override in overrides:
        conf |= dict(override)
    return conf


def parse_spark_conf(assignments: Iterable[str]) -> dict[str, str]:
    """`KEY=VALUE` texts (`run --conf`) as settings; a text without `=` or a key that is not a
    Spark setting (`spark.` ...) raises InvalidConfigError naming it."""
    from schemas.errors import InvalidConfigError

    conf: dict[str, str] = {}
    for text in assignments:
        key, equals, value = text.partition("=")
        key = key.strip()
        if not equals or not key.startswith("spark.") or not value.strip():
            raise InvalidConfigError(f"--conf {text!r}: expected spark.KEY=VALUE, e.g. "
                                     "spark.sql.shuffle.partitions=8")
        conf[key] = value.strip()
    return conf


def build_spark_session(
    cache_dir: Path,
    app_name: str = "kafka-reassigner",
    master: str = "local[2]",
    checkpoint_dir: Path | None = None,
    extra_conf: dict[str, str] | None = None,
    spark_jars: str | None = None,
):
    """A SparkSession ready for `readStream.format("kafka")` and `from_avro`."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Local mode talks to itself over loopback only, whatever the host name resolves to.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master).config(
        "spark.jars", compute_spark_jars(cache_dir, spark_jars))
    if checkpoint_dir is not None:
        builder = builder.config("spark.sql.streaming.checkpointLocation", str(checkpoint_dir))
    for key, value in compute_spark_conf(master, extra_conf or {}).items():
        builder = builder.config(key, value)
    with jvm_in_its_own_session():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    # "Current batch is falling behind" is logged for every micro-batch that outlasts the trigger
    # interval, which a 100 ms trigger makes routine: noise, not news.
    jvm = session.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
        jvm.org.apache.logging.log4j.Level.ERROR)
    start_callback_server(session)
    return session


@contextmanager
def jvm_in_its_own_session() -> Iterator[None]:
    """While pyspark launches Spark's JVM, its `Popen` starts the child in a new session (module
    doc). pyspark passes its own arguments (a `preexec_fn` ignoring SIGINT, stdin a pipe); this
    adds `start_new_session` to them and changes nothing in the driver."""
    import pyspark.java_gateway as gateway

    launch = gateway.Popen

    def popen(*arguments, **options):
        return launch(*arguments, **{**options, "start_new_session": True})

    gateway.Popen = popen
    try:
        yield
    finally:
        gateway.Popen = launch


def start_callback_server(session) -> None:
    """Start py4j's callback server now (see the module doc); PermanentError if its socket got a
    descriptor `select()` cannot watch."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = session.sparkContext._gateway
    ensure_callback_server_started(gateway)
    problem = compute_callback_server_problem(gateway._callback_server.server_socket.fileno())
    if problem is not None:
        raise PermanentError(problem)


class _JvmShutdownHook:
    """A `java.lang.Runnable` served by py4j's callback server: the JVM calls `run` as it shuts
    down. Nothing may escape it (the JVM would print it)."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action

    def run(self) -> None:
        try:
            self.action()
        except Exception as error:  # the driver is going away too: nothing left to do
            log.debug("stopping before Spark: %s", error)

    # java.lang.Object's methods reach the proxy too (Hadoop keeps its hooks in a HashSet).
    def hashCode(self) -> int:  # noqa: N802 (Java's name)
        return id(self) & 0x7FFFFFFF

    def equals(self, other) -> bool:
        return other is self

    def toString(self) -> str:  # noqa: N802
        return "kafka-reassigner: stop the query before Spark stops"

    class Java:
        implements = ["java.lang.Runnable"]


_hooks: list[_JvmShutdownHook] = []  # held here: py4j keeps only a weak hold on a callback object


def stop_before_spark(session, action: Callable[[], None]) -> None:
    """Run `action` (the driver's own stop: finish the batch in progress, stop the query) when
    Spark's JVM begins to shut down, before Spark's shutdown hook stops the SparkContext."""
    jvm = session.sparkContext._jvm
    hook = _JvmShutdownHook(action)
    _hooks.append(hook)
    jvm.org.apache.hadoop.util.ShutdownHookManager.get().addShutdownHook(
        hook, STOP_HOOK_PRIORITY, STOP_HOOK_TIMEOUT_SECONDS, jvm.java.util.concurrent.TimeUnit.SECONDS)


def compute_callback_server_problem(descriptor: int) -> str | None:
    """Why py4j's callback server cannot serve Spark on `descriptor`, or None."""
    if descriptor < SELECT_LIMIT:
        return None
    return (f"Spark's callback server got file descriptor {descriptor}, which select() cannot watch "
            f"(limit {SELECT_LIMIT}): this process holds too many open files or sockets; build the "
            "Spark session before opening them, or find what leaks them")


def kafka_client_options(bootstrap_servers: str, client_properties: dict[str, str]) -> dict[str, str]:
    """Spark Kafka source/sink options: `kafka.`-prefixed client settings (security included)."""
    options = {"kafka.bootstrap.servers": bootstrap_servers}
    for key, value in client_properties.items():
        options[f"kafka.{key}"] = value
    return options
