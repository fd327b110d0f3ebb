"""Helpers shared by the test modules; no test module imports another test module.

* :mod:`tests.support.protocol`: the raw protocol client (one request over a fresh socket,
  or one connection speaking kio entities, optionally over SASL), and the few raw requests
  several modules send;
* :mod:`tests.support.lso`: waiting until the last stable offset reaches the high watermark;
* :mod:`tests.support.clients`: librdkafka readers and transactional producers, kcat, the
  CLI broker in a child process, SASL settings;
* :mod:`tests.support.aio_clients`: the same through aiokafka;
* :mod:`tests.support.readback`: whole records (keys, headers) read back by independent
  clients, and a transaction prepared in another process;
* :mod:`tests.support.txns`: the interleaved committed / aborted / open transactions, and
  committed batches laid out partition by partition;
* :mod:`tests.support.tls`: certificates for the TLS listeners (``trustme``);
* :mod:`tests.support.bad_options`: the bad reader options, by name;
* :mod:`tests.support.records`: record batches built byte by byte;
* :mod:`tests.support.spark_session`: the Spark session plugin (the ``spark`` fixture and
  marker, ``local_spark_only``), listed in ``tests/conftest.py``;
* :mod:`tests.support.writer_kit` and :mod:`tests.support.kafka_data`: the Spark writer
  tests' queries, gates and waits, and their topic layouts and reference reader.

Its own tests (``test_*.py`` here) check the harness: ``make test``'s lanes and the hang
detectors.
"""
