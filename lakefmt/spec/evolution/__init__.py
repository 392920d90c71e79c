"""Schema evolution (format version 2): the rules a change must keep (:mod:`.promotion` for types, :mod:`.editor`
applying changes in order) and comparing two schemas by field id (:mod:`.changes`; ids: :mod:`lakefmt.spec.fields`).
Pure like all of spec: imports the neutral modules and spec (never spec.sql)."""
