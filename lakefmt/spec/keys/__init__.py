"""Key tables in the format: the primary key's stable hash and buckets (:mod:`.hashing`), key index files
(:mod:`.index_file`), merge engines' options (:mod:`.merge_engine`) and row kinds of change input (:mod:`.rowkind`).
Pure like all of spec: imports the neutral modules and spec only. Their use by upserts: lakefmt.rewrite.keys."""
