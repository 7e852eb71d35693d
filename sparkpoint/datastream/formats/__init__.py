"""PyFlink's ``pyflink.datastream.formats``: record formats of connectors (``json``, ``parquet``)."""
