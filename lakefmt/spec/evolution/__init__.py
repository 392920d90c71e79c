"""Schema evolution (format version 2): field ids at any depth (:mod:`.fields`), the rules a change must keep
(:mod:`.promotion` for types, :mod:`.editor` applying changes in order), comparing two schemas (:mod:`.changes`).
Pure like all of spec: imports the neutral modules and spec only."""
