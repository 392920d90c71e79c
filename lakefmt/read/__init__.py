"""Planning and reading snapshots."""
