"""PyFlink-compatible connectors: file_system, generator."""
