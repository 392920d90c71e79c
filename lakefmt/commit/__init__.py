"""Driver-side commit: the protocol and manifest merging."""
