"""Lakelog: a diskless, leaderless, Kafka-wire-compatible streaming log."""

import sys

__version__ = "0.1.0"


def _import_kio_without_hypothesis() -> None:
    """kio registers Hypothesis strategies for its types whenever Hypothesis is importable,
    so every process importing lakelog would load Hypothesis, and with it pytest and trio:
    0.3 s and 17 MiB here, in each broker, CLI command and Spark worker of an environment
    that has Hypothesis (the development venv, which `make serve` uses, does). Outside a
    test process nothing uses those strategies, so kio is imported with Hypothesis hidden
    and Hypothesis is importable again afterwards; a test process (pytest imported) keeps
    kio's strategies."""
    if "pytest" in sys.modules or "hypothesis" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # import then fails
    try:
        import kio.static._phantom  # noqa: F401  (the module that tries the import)
    except ImportError:  # kio missing: whatever imports it reports that
        pass
    finally:
        if "hypothesis" in sys.modules and sys.modules["hypothesis"] is None:
            del sys.modules["hypothesis"]


_import_kio_without_hypothesis()
