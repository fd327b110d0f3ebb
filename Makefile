# Two commands matter: `make demo` and `make test`. Both create what they need.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev

.PHONY: demo test lint check-python venv kcat bench chaos clean

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (set PYTHON=...)")'

$(STAMP): pyproject.toml | check-python
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

kcat:
	@command -v kcat >/dev/null 2>&1 || { \
	  echo "installing kcat (Debian package)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench notebooks
	$(VENV)/bin/ruff format --check src tests bench notebooks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	d=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $$d; s=$$?; rm -rf $$d; exit $$s

test: lint kcat
	$(PY) -m pytest
	# The Spark tests again with separate executor JVMs, then through Spark Connect
	# (tests that run their own Spark in a child process ran once above).
	KAFKA_TXN_SPARK=local-cluster $(PY) -m pytest tests/spark -m "not own_spark"
	KAFKA_TXN_SPARK=connect $(PY) -m pytest tests/spark -m "not own_spark"

demo: $(STAMP)
	$(PY) -m pyspark_kafka_txn demo

# The exactly-once pipeline under seeded faults: `make chaos SEEDS=50 DURATION=60`, or one
# seed again with `make chaos SEED=17`. Writes chaos-report/report.md and report.json.
SEEDS    ?= 5
DURATION ?= 60
chaos: $(STAMP)
	$(PY) -m tests.chaos.run --duration $(DURATION) $(if $(SEED),--seed $(SEED),--seeds $(SEEDS))

bench: $(STAMP)
	$(PY) bench/broker_throughput.py
	$(PY) bench/client_producer.py
	$(PY) bench/writer_overhead.py
	$(PY) bench/writer_commit.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
