# The reassigner processes (pipeline, watcher, executor, status server) in one image;
# docker-compose.yml picks the command. Spark runs in local mode inside the pipeline container, so the image carries a JRE and
# the Spark connector jars, fetched from Maven Central at build time (the image then runs offline).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    REASSIGNER_CACHE_DIR=/opt/reassigner/cache \
    PYSPARK_PYTHON=/usr/local/bin/python

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven procps \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/reassigner/src
COPY . .
# The exact versions of requirements.lock, checked against its hashes (the test tools included), then the product.
RUN pip install --require-hashes -r requirements.lock \
 && pip install --no-deps . \
 && python -c "from pathlib import Path; from runtime.clients.jars import ensure_jars; \
ensure_jars(Path('/opt/reassigner/cache'), 'spark')" \
 && rm -rf /root/.m2

# The checkpoint dir exists in the image, owned by the product's user: a named volume mounted
# there starts with its owner, so uid 10001 can write it (a volume on a path the image lacks
# starts root-owned, and the pipeline could not write its checkpoints).
RUN useradd --create-home --uid 10001 reassigner \
 && mkdir -p /var/lib/reassigner/checkpoints \
 && chown -R reassigner /var/lib/reassigner /opt/reassigner/cache
USER 10001
WORKDIR /var/lib/reassigner

EXPOSE 9400
ENTRYPOINT ["reassigner"]
CMD ["--help"]
