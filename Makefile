# Two commands do everything on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SERVE_STAMP := $(VENV)/.installed-serve

.PHONY: serve test docs bench bench-cluster faults fuzz offset-kills lint venv clean

venv: $(STAMP)

# Everything: the broker, the pipeline's Spark extra and the test tools.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP) $(SERVE_STAMP)

# Only what serving needs (no PySpark, no test tools); a full venv has it already.
$(SERVE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(SERVE_STAMP)

serve: $(SERVE_STAMP)
	$(BIN)/lakelog serve --listen 127.0.0.1:9092 --data-dir ./lakelog-data

test: venv
	bash scripts/run-tests.sh

# docs/configuration.md from the code (src/lakelog/config.py); a test fails when it is stale.
docs: venv
	mkdir -p docs
	$(BIN)/python -m lakelog.cli.config_reference > docs/configuration.md.tmp
	mv docs/configuration.md.tmp docs/configuration.md

# The long fault run (minutes per backend): kills, stops, PostgreSQL and S3 faults, a table.
faults: venv
	$(BIN)/python scripts/faults.py

# The long fuzz run (~10-20 min per listener): >= 1,000,000 mutated requests from the captured
# corpus on PLAINTEXT and on SASL_PLAINTEXT, a table of crashes, unhandled exceptions, the good
# client's p50/p99 and RSS. Re-capture the corpus with scripts/capture_corpus.py.
fuzz: venv
	$(BIN)/python scripts/fuzz.py

# The long offset-commit kill run (issue 36): 25 rounds of killing a per-record committer,
# then the broker, on SQLite and on PostgreSQL (`make test` runs 2 rounds of each).
offset-kills: venv
	LAKELOG_OFFSET_KILL_ROUNDS=25 bash scripts/run-tests.sh tests/chaos/test_offset_commit_kills.py
	LAKELOG_OFFSET_KILL_ROUNDS=25 LAKELOG_TEST_BACKEND=scaleout bash scripts/run-tests.sh tests/chaos/test_offset_commit_kills.py

bench: venv
	$(BIN)/python bench/produce_consume.py
	$(BIN)/python bench/put_fsync.py
	$(BIN)/python bench/compaction_cpu.py
	$(BIN)/python bench/offset_commits.py

bench-cluster: venv
	$(BIN)/python bench/two_brokers.py
	$(BIN)/python bench/commit_latency.py

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/python scripts/check_imports.py
	$(BIN)/ruff format --check src tests bench

clean:
	rm -rf $(VENV) lakelog-data .pytest_cache .ruff_cache
