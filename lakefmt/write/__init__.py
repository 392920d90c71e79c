"""Task-side writing: data files and per-task manifests."""
