"""Real servers on 127.0.0.1 for the test suite and the benchmarks, started from this checkout.

A Kafka-protocol broker (``kafka_server``: noida-db), a PostgreSQL server (``postgres_server``),
an S3-API server (``s3_server``: moto) and a Spark standalone cluster whose workers have
private ``/tmp`` directories (``spark_cluster``). The three network servers share their process
life cycle (``local_server``). They are not part of the installed ``sparkpoint`` package: they
need the ``test`` extra and, for PostgreSQL and the cluster, programs of the machine. The
helpers a user needs to test their own jobs are in :mod:`sparkpoint.testing`.
"""
