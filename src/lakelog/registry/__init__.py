"""The built-in schema registry: Confluent's REST API over schemas stored in the batch
coordinator (`app`), the rules of each schema type (`avro`, `json_schema`, `protobuf`),
compatibility levels (`compatibility`), and the embedded server (`server`)."""
