"""`lakelog console`: a read-only web console for a Lakelog (or any Kafka-protocol) cluster.

It is a client of the cluster like the CLI: pages are rendered from Kafka admin requests
made at view time (as the principal of `--command-config`, so ACLs limit what it shows),
and live charts come from a bounded in-memory history the sampler fills by scraping every
broker's /metrics and polling group and topic offsets. No Prometheus, no build step.
"""
