"""How the console reaches the cluster: one bootstrap list and one set of client security
settings (Kafka's `--command-config` properties), used both by the admin client and by the
message browser's librdkafka consumer, so both act as the same principal."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakelog.admin.client import AdminClient
from lakelog.mirror.client import MirrorClient
from lakelog.security.client_config import ClientSecurity

ADMIN_TIMEOUT_S = 15.0
CLIENT_ID = "lakelog-console"


@dataclass(frozen=True)
class ClusterAccess:
    bootstrap: str
    security: ClientSecurity = field(default_factory=ClientSecurity)

    async def admin(self) -> AdminClient:
        """A fresh admin connection (MirrorClient: it also reads Lakelog's mirrors);
        the caller closes it."""
        return await MirrorClient.connect(
            self.bootstrap,
            CLIENT_ID,
            timeout=ADMIN_TIMEOUT_S,
            security=self.security if self.security.protocol != "PLAINTEXT" else None,
        )

    def librdkafka_config(self) -> dict[str, str]:
        """The same principal for confluent-kafka."""
        s = self.security
        config = {
            "bootstrap.servers": self.bootstrap,
            "client.id": CLIENT_ID,
            "security.protocol": s.protocol.lower(),
        }
        if s.uses_sasl:
            config["sasl.mechanism"] = s.mechanism or "PLAIN"
            config["sasl.username"] = s.username or ""
            config["sasl.password"] = s.password or ""
        if s.uses_tls:
            if s.ca_location:
                config["ssl.ca.location"] = s.ca_location
            if s.certificate_location and s.key_location:
                config["ssl.certificate.location"] = s.certificate_location
                config["ssl.key.location"] = s.key_location
            if s.key_password:
                config["ssl.key.password"] = s.key_password
            config["ssl.endpoint.identification.algorithm"] = (
                "https" if s.check_hostname else "none"
            )
        return config
