"""`python -m lakelog.pipeline <job> ...`, and the file spark-submit runs on a cluster:
`spark-submit --master spark://host:7077 <site-packages>/lakelog/pipeline/__main__.py gc
--storage-url s3://... --coordinator-url postgresql://...` (spark-submit's master then
applies; `--master` is only needed outside spark-submit)."""

from lakelog.pipeline.cli import pipeline_app

if __name__ == "__main__":
    pipeline_app(prog_name="lakelog pipeline")
