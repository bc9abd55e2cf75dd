"""`python -m lakelog.pipeline <job> ...`, and the file spark-submit runs on a cluster:
`spark-submit --master spark://host:7077 <site-packages>/lakelog/pipeline/__main__.py gc
--storage-url s3://... --coordinator-url postgresql://...` (spark-submit's master then
applies; `--master` is only needed outside spark-submit)."""

import sys

from lakelog.cli.common import run_cli
from lakelog.pipeline.cli import pipeline_app
from lakelog.util import process_setup  # noqa: F401  (first: before kio imports Hypothesis)

if __name__ == "__main__":
    sys.exit(run_cli(pipeline_app))
