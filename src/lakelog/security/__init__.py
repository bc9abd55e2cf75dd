"""Client and listener security: TLS contexts, SASL PLAIN and SCRAM (both sides), and the
Kafka client settings that choose them. Shared by the broker's listener (`net/`) and the
mirror's source connections (`mirror/`)."""
