"""What a pipeline job reports while it runs and when it ends, independent of how it is
shown (the CLI draws a rich progress bar; tests and spark-submit may pass `NullProgress`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol


class Progress(Protocol):
    """Job progress: one stage at a time, each with an optional known total."""

    def stage(self, description: str, total: int | None = None) -> None:
        """Start a new stage (the previous one ends)."""

    def advance(self, amount: int = 1) -> None:
        """Count work done in the current stage."""

    def log(self, message: str) -> None:
        """A line worth showing above the progress display."""


class NullProgress:
    """Reports nothing."""

    def stage(self, description: str, total: int | None = None) -> None:
        return None

    def advance(self, amount: int = 1) -> None:
        return None

    def log(self, message: str) -> None:
        return None


@dataclass
class JobSummary:
    """The figures every job reports at the end (zero where a job has nothing to count)."""

    job: str
    dry_run: bool = False
    objects_listed: int = 0
    objects_deleted: int = 0
    bytes_deleted: int = 0
    objects_written: int = 0
    bytes_rewritten: int = 0
    batches_moved: int = 0
    partitions: int = 0
    seconds: float = 0.0
    """Wall time of the whole job, Spark start-up included."""
    spark_seconds: float | None = None
    """Of which waiting for the Spark session; None when the job started none."""
    nothing_to_do: bool = False
    """The plan found no work (so no Spark session was needed for it)."""
    details: dict[str, int | float | str] = field(default_factory=dict)
    """Job-specific figures (e.g. orphans found, records dropped)."""
    started: float = field(default_factory=time.monotonic, repr=False)

    def finish(self) -> JobSummary:
        self.seconds = time.monotonic() - self.started
        return self

    def rows(self) -> list[tuple[str, str]]:
        """(name, value) pairs for the summary table."""
        rows = [
            ("objects listed", f"{self.objects_listed:,}"),
            ("objects deleted", f"{self.objects_deleted:,}"),
            ("bytes deleted", f"{self.bytes_deleted:,}"),
            ("objects written", f"{self.objects_written:,}"),
            ("bytes rewritten", f"{self.bytes_rewritten:,}"),
            ("batches moved", f"{self.batches_moved:,}"),
            ("partitions", f"{self.partitions:,}"),
        ]
        rows += [(name, _fmt(value)) for name, value in self.details.items()]
        return rows + self.timing_rows()

    def timing_rows(self) -> list[tuple[str, str]]:
        """Spark start-up (its own line) and the whole time, start-up included."""
        spark = "not started" if self.spark_seconds is None else f"{self.spark_seconds:.2f} s"
        return [("Spark start-up", spark), ("time", f"{self.seconds:.2f} s")]


def _fmt(value: int | float | str) -> str:
    if isinstance(value, bool | str):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.2f}"
