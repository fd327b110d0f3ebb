"""The writer without Spark: its task, commit, abort and lingering-transaction code driven
as Spark drives it, against the session's cluster over TCP."""
