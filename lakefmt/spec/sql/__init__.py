"""SQL text as filters: sqlglot parses it (:mod:`.tree`), one module binds the tree to pyarrow expressions (.bind,
literals and casts in :mod:`.literals`); public entry points :mod:`.predicate` and :mod:`.row_filter`.
Pure like all of spec: imports the neutral modules, spec (schema, filters) and sqlglot; never spec.evolution."""
