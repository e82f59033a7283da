"""The store layer: every SQL statement, the schema and its migrations, hashing and Merkle roots, the indexes.

``connection`` opens the file (apsw, pragmas, extensions, schema.sql); ``rows`` reads and writes
node, edge, alias and proposal rows; ``queries`` holds the read-side SQL; ``merkle`` keeps world
roots; ``vector_index``, ``token_index`` and ``world_vectors`` keep the derived indexes in step.
Nothing here knows about extraction, recall or the facade.
"""
