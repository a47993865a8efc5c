"""Command-line tools for the book that are not part of ``lib`` (run as ``python -m tools.<name>``)."""
