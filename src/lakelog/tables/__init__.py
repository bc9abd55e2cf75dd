"""Table topics (issue 33): a topic's committed records as an Apache Iceberg table.

`table_config` (light, imported by the broker) parses and checks the `lakelog.iceberg.*`
topic configs; `catalog` (pyiceberg, the pipeline's only) opens the catalog the tables job
commits to. The job itself is `lakelog.pipeline.tables`.
"""
