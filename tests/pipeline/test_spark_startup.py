"""What a Spark read pays before it reads: each step of a read runs in a fresh Python process
(the source's schema, its partitions, the reading tasks), so each must import only what it
needs. Checked in fresh interpreters, since this one has imported everything already."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakelog.pipeline.records import numpy_array, numpy_values, repeated_string
from lakelog.pipeline.spark_daemon import redundant_zips

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _fresh_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_schema_step_leaves_reading_and_planning_code_unimported() -> None:
    # Spark's schema step imports lakelog.spark.source in a fresh process just to ask for
    # the schema: it must not pay for pyarrow, the coordinator or object storage.
    out = _fresh_python(
        """
        import sys
        import lakelog.spark
        from lakelog.spark.source import LakelogDataSource
        LakelogDataSource({"subscribe": "t", "lakelog.data.dir": "/nonexistent"}).schema()
        heavy = ("pyarrow", "numpy", "obstore", "pandas")
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy
                     or m.startswith(("lakelog.coordinator", "lakelog.log.storage"))))
        """
    )
    assert out.strip() == "[]"


def test_decoding_for_spark_does_not_import_pandas() -> None:
    # pa.array, pa.scalar, pa.repeat and Array.to_numpy import pandas on their first call
    # (~0.2 s in every fresh Spark worker); the decoder builds arrays from buffers instead.
    out = _fresh_python(
        """
        import sys
        from lakelog.pipeline.records import RecordColumns
        from lakelog.log.protocol.records import BatchHeader
        from lakelog.pipeline.batch_writer import encode_record, rebuild_batch
        from lakelog.spark.range_reader import to_spark_arrow

        header = BatchHeader(0, 0, -1, 2, 0, 0, 2, 1000, 1000, -1, -1, -1, 0)
        records = [
            encode_record(0, 0, b"k", b"v"),
            encode_record(1, 1, None, None, [("h", b"x"), ("n", None)]),
            encode_record(2, 2, b"k2", b"v" * 100),
        ]
        columns = RecordColumns()
        columns.add_batch(rebuild_batch(header, 0, records), base_offset=40)
        batch = to_spark_arrow(columns, "orders", 3)
        print("pandas" in sys.modules)
        print(batch.num_rows)
        print(batch.column("headers").to_pylist())
        print(batch.column("topic").to_pylist(), batch.column("partition").to_pylist())
        print(batch.column("offset").to_pylist(), batch.column("timestamp").to_pylist())
        """
    )
    lines = out.splitlines()
    assert lines[:2] == ["False", "3"]
    assert lines[2] == str([[], [{"key": "h", "value": b"x"}, {"key": "n", "value": None}], []])
    assert lines[3] == "['orders', 'orders', 'orders'] [3, 3, 3]"
    assert lines[4].startswith("[40, 41, 42] [datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=")


def test_buffer_built_arrays_equal_pa_array() -> None:
    values = np.array([3, -1, 7], dtype=np.int64)
    assert numpy_array(values, pa.int64()).equals(pa.array(values, pa.int64()))
    assert numpy_array(values, pa.int32()).equals(pa.array(values, pa.int32()))
    stamps = pa.timestamp("us", tz="UTC")
    assert numpy_array(values, stamps).equals(pa.array(values, stamps))
    sliced = pa.array([1, 2, 3, 4], pa.int64()).slice(1, 2)
    assert numpy_values(sliced).tolist() == [2, 3]
    assert repeated_string("topic", 3).equals(pa.array(["topic"] * 3, pa.string()))
    assert repeated_string("t", 0).equals(pa.array([], pa.string()))


def test_daemon_drops_only_the_zips_of_the_installed_pyspark(tmp_path: Path) -> None:
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    ours = [str(lib / "pyspark.zip"), str(lib / f"py4j-{version('py4j')}-src.zip")]
    foreign = [str(tmp_path / "pyspark.zip"), str(lib / "py4j-0.0.1-src.zip")]
    path = [*ours, *foreign, *sys.path]
    assert redundant_zips(path) == ours
    # Without an installed pyspark elsewhere on the path, the zips are all there is.
    assert redundant_zips([*ours, str(tmp_path)]) == []


def test_task_workers_import_the_installed_pyspark(spark: SparkSession) -> None:
    # Spark puts pyspark.zip first on its workers' path; through lakelog.pipeline.spark_daemon
    # (SPARK_CONF, set by the `spark` fixture as by get_or_create) they import the
    # installed, compiled copy.
    def where(_: int) -> str:
        import pyspark

        return pyspark.__file__ or ""

    files = spark.sparkContext.parallelize(range(2), 2).map(where).collect()
    assert files and all(".zip" not in f and f.endswith("__init__.py") for f in files), files
