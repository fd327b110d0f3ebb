"""The exactly-once writer (see docs/writer.md; the protocol: docs/design.md)."""
