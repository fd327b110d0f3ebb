# Two commands matter: `make demo` and `make test`. Both create what they need.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev

.PHONY: demo test lint check-python venv kcat maven krb5-dev bench bench-compare bench-neighbours chaos compat spark-versions clean

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (set PYTHON=...)")'

$(STAMP): pyproject.toml setup.cfg | check-python krb5-dev
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

# The dev extra's gssapi (Kerberos for the writer) has no Linux wheel: pip builds it with
# MIT Kerberos' krb5-config and headers. The tests' KDC installs its own packages.
krb5-dev:
	@command -v krb5-config >/dev/null 2>&1 || { \
	  echo "installing libkrb5-dev (Debian package)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libkrb5-dev >/dev/null; }

# Apache Kafka's jars come from Maven Central through Maven (tests/support/apache_kafka).
maven:
	@command -v mvn >/dev/null 2>&1 || { \
	  echo "installing maven (Debian package)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench notebooks
	$(VENV)/bin/ruff format --check src tests bench notebooks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	d=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $$d; s=$$?; rm -rf $$d; exit $$s

# The tests are filed by subject (tests/README.md); the legs select them by marker. JOBS
# (notebooks, the wheel in a fresh environment, the chaos harness) and the smoke suite on
# older PySpark releases (tests/spark_versions) run their own way, in legs of their own.
JOBS := tests/notebooks tests/packaging tests/chaos
OWN_LEGS := $(addprefix --ignore=,$(JOBS) tests/spark_versions)
# The comparisons with Spark's built-in connector run in the Apache Kafka leg only: what
# they check is what the options mean, the same in every Spark session, and Apache Kafka
# is the reference (make compat runs them on the embedded cluster too).
PARITY_TESTS := tests/reader/test_parity_reader.py tests/writer/test_parity_writer.py
PARITY := $(addprefix --ignore=,$(PARITY_TESTS))
# The Spark tests: every test of the session's SparkSession (marker spark, given at
# collection to every user of the spark fixture) and those running a Spark of their own.
# Tests marked compat run in make compat only (CI's time; tests/README.md).
SPARK_TESTS := -m '(spark or own_spark) and not compat' $(OWN_LEGS) $(PARITY)
# The Apache Kafka leg: every test that talks to the session's cluster (the others are
# deselected), against a single-node Apache Kafka.
APACHE_KAFKA_TESTS := -m 'not compat' $(OWN_LEGS)

# The tests of the session's SparkSession again through Spark Connect, its server's
# executors separate JVMs (local-cluster): what both add to a local session, in one leg.
# Only the tests that use the session (marker spark_session): the others of the Spark
# modules call the data source's classes directly, the same in every mode. Tests that run
# their own Spark in a child process run once: in the first leg, or the driver kills in
# the Apache Kafka leg; tests marked one_spark_mode check a client-side subject, such as
# a SASL mechanism, that is the same in every Spark mode, and run in the first leg only.
SPARK_AGAIN := -m 'spark_session and not own_spark and not compat and not one_spark_mode' $(PARITY)
# Against Apache Kafka itself (newest 4.x, one node), fetched from Maven Central.
APACHE_LEG := KAFKA_TXN_TARGET=apache $(PY) -m pytest $(APACHE_KAFKA_TESTS)
# Everything else against the embedded cluster; the tests that kill the Spark driver
# (marker driver_kill) run in the Apache Kafka leg instead. JOBS run after the Apache
# Kafka leg, in its lane.
EMBEDDED := KAFKA_TXN_DRIVER_KILLS=apache $(PY) -m pytest
NOT_SPARK := -m 'not spark and not own_spark and not compat' $(addprefix --ignore=,$(JOBS))

# Two lanes at once (a leg keeps the machine less than half busy; each lane's output is
# printed whole once both have ended, then every leg's time), of about equal length: the
# Spark tests in each Spark mode, the smoke suite on the oldest PySpark line (Spark
# Connect and the smoke suite share its one port, so one lane) and the other tests on the
# embedded cluster, beside the Apache Kafka leg and the jobs.
test: lint kcat maven
	$(PY) -m tests.support.lanes \
	  --lane "spark-local=$(EMBEDDED) $(SPARK_TESTS)" \
	    "spark-connect-cluster=KAFKA_TXN_SPARK=connect-cluster $(PY) -m pytest $(SPARK_AGAIN)" \
	    "spark-versions=$(MAKE) spark-versions SPARK_VERSIONS='$(CI_SPARK_VERSIONS)'" \
	    "embedded=$(EMBEDDED) $(NOT_SPARK)" \
	  --lane "apache-kafka=$(APACHE_LEG)" \
	    "embedded-jobs=$(EMBEDDED) -m 'not compat' $(JOBS)"

# The Spark tests, the writer's and the client's against a matrix of Apache Kafka releases,
# node counts and transaction versions, then the tests marked compat (not in CI: over an
# hour): per cell, tests/writer and tests/client, then the Spark tests of the other
# subjects. `make compat COMPAT="4.0.2:3:1"` runs one cell (version:nodes:transaction.version;
# tv "-" keeps the release's default). Releases before 3.3 run in ZooKeeper mode (their
# KRaft was not production ready), later ones in KRaft; KAFKA_TXN_APACHE_MODE=kraft|zookeeper
# overrides (3.x only). 3.0.2 is the oldest supported release, 3.7.2 one that managed
# services run widely.
COMPAT ?= 3.0.2:1:- 3.0.2:3:- 3.7.2:1:- 3.7.2:3:- 3.9.2:1:- 4.0.2:1:1 4.0.2:1:2 4.0.2:3:2 \
	4.4.0:1:1 4.4.0:1:2 4.4.0:3:1 4.4.0:3:2
COMPAT_TESTS := tests/writer tests/client
COMPAT_SPARK := -m 'spark or own_spark' $(OWN_LEGS) $(addprefix --ignore=,$(COMPAT_TESTS))
compat: $(STAMP) kcat maven
	@set -e; for cell in $(COMPAT); do \
	  v=$${cell%%:*}; rest=$${cell#*:}; n=$${rest%%:*}; tv=$${rest#*:}; [ "$$tv" = - ] && tv=; \
	  echo "== Apache Kafka $$v, $$n node(s), transaction.version $${tv:-default}, mode $${KAFKA_TXN_APACHE_MODE:-default}"; \
	  ( export KAFKA_TXN_TARGET=apache KAFKA_TXN_APACHE_VERSION=$$v KAFKA_TXN_APACHE_NODES=$$n \
	      KAFKA_TXN_APACHE_TV=$$tv; \
	    $(PY) -m pytest -q $(COMPAT_TESTS); $(PY) -m pytest -q $(COMPAT_SPARK) ); \
	done; \
	echo "== the tests kept out of make test (marker compat) and the other PySpark lines"; \
	$(PY) -m pytest -q -m compat $(JOBS); \
	echo "== the comparisons with format(\"kafka\") on the embedded cluster"; \
	$(EMBEDDED) -q -m 'not compat' $(PARITY_TESTS); \
	$(MAKE) spark-versions SPARK_VERSIONS='$(filter-out $(CI_SPARK_VERSIONS),$(SPARK_VERSIONS))'

# The smoke suite (tests/spark_versions: reader exactly, writer exactly once across a driver
# kill, Spark Connect) on the newest release of each PySpark line below, each in a fresh
# virtual environment holding that PySpark and the package's wheel (pip's cache keeps the
# downloads). `make spark-versions SPARK_VERSIONS=4.1.3` tests one exact release.
SPARK_VERSIONS ?= 4.0 4.1 4.2
# make test runs the oldest line (the newest, 4.3, runs the whole suite); make compat the rest.
CI_SPARK_VERSIONS := 4.0
spark-versions: $(STAMP)
	KAFKA_TXN_SPARK_VERSIONS="$(SPARK_VERSIONS)" $(PY) -m pytest tests/spark_versions

demo: $(STAMP)
	$(PY) -m pyspark_kafka_txn demo

# The exactly-once pipeline under seeded faults: `make chaos SEEDS=50 DURATION=60`, or one
# seed again with `make chaos SEED=17`; `QUERIES=3` runs three queries per seed, the faults
# hitting one (docs/chaos.md). Writes chaos-report/report.md and report.json.
SEEDS    ?= 5
DURATION ?= 60
KAFKA    ?= embedded
QUERIES  ?= 1
chaos: $(STAMP)
	$(PY) -m tests.chaos.run --kafka $(KAFKA) --queries $(QUERIES) --duration $(DURATION) $(if $(SEED),--seed $(SEED),--seeds $(SEEDS))

bench: $(STAMP)
	$(PY) bench/broker_throughput.py
	$(PY) bench/client_producer.py
	$(PY) bench/writer_overhead.py
	$(PY) bench/writer_commit.py

# kafka_txn side by side with Spark's built-in format("kafka") on Apache Kafka (both from
# Maven Central, cached outside the repository): reader, writer, end-to-end latency, with
# the goals met or missed; 5 interleaved rounds of each. About 40 minutes; writes
# bench-compare.md, its chart bench-compare.png and the raw report bench-compare.json;
# exits 3 when processes outside the benchmark took more than --max-other-cpu (10 %) of
# the CPU in a measured phase (BENCH_ARGS="--allow-loaded" keeps such a run, marked).
# BENCH_ARGS="--quick" for a try-out.
bench-compare: $(STAMP) maven
	$(PY) bench/compare.py --report bench-compare.md --plot bench-compare.png $(BENCH_ARGS)

# One query's commit time with 0, 1, 4 and 16 other queries writing beside it under the
# same transactionalIdPrefix (issue 32): KAFKA=apache (default: embedded) for Apache Kafka
# from Maven Central. Writes bench-neighbours.md and bench-neighbours.json; BENCH_ARGS
# passes more options (e.g. "--rounds 1 --batches 2" for a try-out).
bench-neighbours: $(STAMP) $(if $(filter apache,$(KAFKA)),maven)
	$(PY) bench/neighbours.py --kafka $(KAFKA) --report bench-neighbours.md --json bench-neighbours.json $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
