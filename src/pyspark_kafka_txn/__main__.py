"""``python -m pyspark_kafka_txn``: same as the ``kafka-txn`` command."""

from __future__ import annotations

import sys

from pyspark_kafka_txn.cli import main

sys.exit(main())
