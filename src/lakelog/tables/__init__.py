"""Table topics (issue 33): a topic's committed records as an Apache Iceberg table.

`table_config` (light, imported by the broker) parses and checks the `lakelog.iceberg.*`
topic configs; `catalog` (pyiceberg, the pipeline's only) opens the catalog the tables job
commits to. The job itself is `lakelog.pipeline.tables`; `rest_catalog` (broker-side, no
pyiceberg) serves the tables read-only over Iceberg's REST API, and `maintenance` expires
snapshots, rewrites small files and deletes orphans.
"""
