"""The doors to the client libraries: the only modules that import kafka-python, confluent-kafka,
redis and faust (the import-linter contract "Client libraries only behind their doors").

One producer configuration and publish-and-wait, one way to create topics, one Kafka and one
Redis error translation (`kafka_errors`, `redis_io`), the Admin API adapter (`kafka_admin`) and
the typed observation of a poll (`cluster_observation`, `cluster_merge`), the command-config
translation for every client (`client_config`), and the Maven jar resolution that Spark and the
local stack share. Every retry follows the one table of policies, `runtime.backoff`.
"""
