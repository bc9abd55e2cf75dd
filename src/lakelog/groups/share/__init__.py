"""Share groups (KIP-932): many consumers read one partition, record by record."""
