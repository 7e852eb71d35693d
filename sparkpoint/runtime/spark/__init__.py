"""The only package that imports pyspark: sessions and epoch execution on Spark."""
