"""The operator's side of the loop: requests in, views and alerts out.

Modules, and which of them do I/O:

    dynamic_config  pure   `config set` / `config get` over the pipeline's table of dynamic keys
    requests        pure builders of Request envelopes and their checks, + `RequestChannel`
                           (check, publish, wait for the verdict: the product's producer)
    views           pure   ControllerState → what `list`, `status`, `request show` and the page
                           show, their JSON documents, sizes and durations as people read them
    tables          print  the views as terminal tables (rich), on the console it is given
    status_page     pure   the status page's HTML and JS
    write_api       pure   the status server's POST routes → the request builders
    alerts_follow   I/O    `reassigner alerts --follow`: alerts topic → coloured lines
    webhook         I/O    `reassigner alerts webhook`: alerts topic → HTTP POST, retries, dead letters
    status_sources  I/O    the status server's state cache and its reader of the alerts topics
    status_server   I/O    status page, JSON API, write API and Prometheus metrics (standard library HTTP)

No module here imports a client library: Kafka is reached through `runtime.clients`
(`kafka_producer` to publish, `kafka_consumer` to read and to run a committing consumer group,
`faust_app` for the faust runner, `kafka_admin` to create topics), which also turns client errors
into `schemas.errors`; the rules (what to show, what to POST, when to dead-letter) stay here.

Nothing here decides anything about the cluster: the pipeline does. The operator package only
writes requests and reads what the pipeline keeps in Redis and publishes on the alerts topic.
"""
