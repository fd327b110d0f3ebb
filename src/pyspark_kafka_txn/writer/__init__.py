"""The exactly-once writer (see docs/writer.md)."""
