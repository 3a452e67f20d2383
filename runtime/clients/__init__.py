"""The doors to the client libraries: the only modules that import kafka-python, confluent-kafka,
redis and faust (import-linter: "client libraries only in adapters").

One producer configuration and publish-and-wait, one way to create topics, one Kafka and one
Redis error translation, one retry policy, the command-config translation for every client, and
the Maven jar resolution that Spark and the local stack share.
"""
