"""The read path: lanes (BM25, vectors, the entity graph), fusion, rerank, context, query pipelines.

Nothing here writes. ``ReadView`` is what a read sees (a connection, the times and the
world it is confined to); the facade builds one per call.
"""
