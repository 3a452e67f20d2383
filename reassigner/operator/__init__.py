"""The operator's side of the loop (SPEC 2, 7, 8): requests in, views and alerts out.

Modules, and which of them do I/O:

    dynamic_config  pure   `config set` / `config get` over the pipeline's table of dynamic keys
    requests        pure builders of Request envelopes + `publish_request` (the product's producer)
    views           pure   ControllerState → the rows of `list` and `status`, and JSON for the API
    status_page     pure   the status page's HTML and JS
    alerts_follow   I/O    `reassigner alerts --follow`: alerts topic → coloured lines
    webhook         I/O    `reassigner alerts webhook`: alerts topic → HTTP POST, retries, dead letters
    status_server   I/O    status page, JSON API and Prometheus metrics (standard library HTTP)

No module here imports a client library: Kafka is reached through `runtime.clients`
(`kafka_producer` to publish, `kafka_consumer` to read and to run a committing consumer group,
`faust_app` for the faust runner, `kafka_admin` to create topics), which also turns client errors
into `schemas.errors`; the rules (what to show, what to POST, when to dead-letter) stay here.

Nothing here decides anything about the cluster: the pipeline does. The operator package only
writes requests and reads what the pipeline keeps in Redis and publishes on the alerts topic.
"""
