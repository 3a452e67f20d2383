"""Java jars from Maven Central, fetched once into a cache by Maven itself.

Two sets, each described by a small pom shipped next to this module (`poms/`):
- `kafka`: the Kafka broker/controller (`kafka.Kafka`, `kafka.tools.StorageTool`) of one release
  (the pom's `kafka.version`, set per fetch: `local_kafka_version`) with its runtime dependencies
  and a Log4j2 backend;
- `spark`: Spark's Kafka source/sink and Avro functions matching the installed pyspark.

The fetch runs `mvn dependency:copy-dependencies` into `<cache>/jars/<set>-<pom hash>/` (the
Kafka set: `kafka-<release>-<pom hash>/`) and writes a `.complete` marker last, so an
interrupted fetch is redone and a changed pom or another release gets a new directory. Maven's own settings (mirrors, proxies) apply; Spark's Ivy resolver is never used.

Production needs no Maven: `reassigner run --spark-jars` (setting `spark_jars`) names the
connector jars instead (paths or URLs, e.g. baked into a Spark image); a missing `mvn` without
them is a `MissingDependencyError` that says so.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from runtime.kafka_versions import check_local_release
from schemas.errors import InvalidConfigError, MissingDependencyError

JAR_SETS = ("kafka", "spark")


def pom_path(jar_set: str) -> Path:
    if jar_set not in JAR_SETS:
        raise MissingDependencyError(f"unknown jar set {jar_set!r}; expected one of {JAR_SETS}")
    return Path(str(resources.files("runtime.clients") / "poms" / f"{jar_set}.xml"))


def jar_dir(cache_dir: Path, jar_set: str, kafka_version: str | None = None) -> Path:
    """Where one set's jars are cached; the Kafka set needs its release."""
    digest = hashlib.sha256(pom_path(jar_set).read_bytes()).hexdigest()[:12]
    if jar_set != "kafka":
        return cache_dir / "jars" / f"{jar_set}-{digest}"
    if kafka_version is None:
        raise MissingDependencyError("the kafka jars need a Kafka release (local_kafka_version)")
    try:
        release = check_local_release(kafka_version)
    except ValueError as error:
        raise InvalidConfigError(f"local_kafka_version: {error}") from None
    return cache_dir / "jars" / f"kafka-{release}-{digest}"


def ensure_jars(cache_dir: Path, jar_set: str, kafka_version: str | None = None) -> list[Path]:
    """The jars of one set (the Kafka set: of release `kafka_version`), fetched with Maven first
    if the cache does not hold them yet."""
    target = jar_dir(cache_dir, jar_set, kafka_version)
    marker = target / ".complete"
    if not marker.exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise MissingDependencyError(
                f"the {jar_set} jars are not in {target} and Maven (`mvn`) is not on PATH to fetch "
                "them; install Maven (apt-get install maven, or `make install`)"
                + ("" if jar_set != "spark" else ", or name the connector jars with --spark-jars "
                   "(REASSIGNER_SPARK_JARS)")
            )
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        command = [
            mvn, "-q", "-B", "-f", str(pom_path(jar_set)),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={target}",
            *([f"-Dkafka.version={kafka_version}"] if jar_set == "kafka" else []),
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])
            release = f" of Kafka {kafka_version}" if jar_set == "kafka" else ""
            raise MissingDependencyError(
                f"Maven could not fetch the {jar_set} jars{release} (exit {result.returncode}); "
                f"check the network, ~/.m2/settings.xml{' or the release number' if release else ''}:\n{tail}"
            )
        marker.write_text("ok\n")
    return sorted(target.glob("*.jar"))


def kafka_classpath(cache_dir: Path, kafka_version: str) -> str:
    """The classpath of Kafka release `kafka_version` (fetched first if need be)."""
    return ":".join(str(jar) for jar in ensure_jars(cache_dir, "kafka", kafka_version))
