-- Table topics (issue 33): the Iceberg SQL catalog that `lakelog pipeline tables` commits to
-- lives in the coordinator's own database. The layout is exactly what pyiceberg's SqlCatalog
-- reads and writes (its "v1" schema: iceberg_type marks tables and views), so pyiceberg
-- opens it as it is and never creates tables of its own here. Only the pipeline's driver
-- writes these tables; brokers only read them, to serve the read-only Iceberg REST catalog
-- (`tables/rest_catalog.py`).
CREATE TABLE iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);

CREATE TABLE iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);
