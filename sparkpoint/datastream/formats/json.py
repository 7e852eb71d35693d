"""PyFlink's ``pyflink.datastream.formats.json``: rows as JSON objects, both ways.

.. code-block:: python

    row_type = Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()])
    serializer = JsonRowSerializationSchema.builder().with_type_info(row_type).build()
    deserializer = (JsonRowDeserializationSchema.builder().type_info(row_type)
                    .ignore_parse_errors().build())

The mapping of types to JSON values is described in :mod:`sparkpoint.common.json_row`.
A deserializer that ignores parse errors returns ``None`` for a bad message, and sources
skip ``None`` records.
"""

from sparkpoint.common.json_row import JsonRowDeserializationSchema, JsonRowSerializationSchema

__all__ = ["JsonRowSerializationSchema", "JsonRowDeserializationSchema"]
