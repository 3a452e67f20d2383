"""The operator's side of the loop (SPEC 2, 7, 8): requests in, views and alerts out.

Modules, and which of them do I/O:

    dynamic_config  pure   `config set` / `config get` over the pipeline's table of dynamic keys
    requests        pure builders of Request envelopes + `publish_request` (confluent-kafka)
    views           pure   ControllerState → the rows of `list` and `status`, and JSON for the API
    kafka_io        I/O    the one place that talks confluent-kafka for this package: client
                           configs, topic creation, error translation into `reassigner.errors`
    alerts_follow   I/O    `reassigner alerts --follow`: alerts topic → coloured lines
    webhook         I/O    `reassigner alerts webhook`: alerts topic → HTTP POST, retries, dead letters
    status_server   I/O    status page, JSON API and Prometheus metrics (standard library HTTP)

Nothing here decides anything about the cluster: the pipeline does. The operator package only
writes requests and reads what the pipeline keeps in Redis and publishes on the alerts topic.
"""
