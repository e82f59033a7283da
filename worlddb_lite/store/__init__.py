"""The store layer: every SQL statement, the schema and its migrations, hashing and Merkle roots.

``connection`` opens the file (apsw, pragmas, extensions, schema.sql); ``rows`` reads and writes
node, edge, alias and proposal rows; ``queries`` holds the read-side SQL; ``merkle`` keeps world
roots. It imports no model: the indexes that need one (vectors, tokens) are in ``index/`` above.
Nothing here knows about extraction, recall or the facade.
"""
