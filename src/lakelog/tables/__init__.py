"""Table topics: topics as Apache Iceberg tables (issue 33)."""
