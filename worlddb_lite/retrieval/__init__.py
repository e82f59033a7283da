"""The read path: the lanes (BM25, vectors, entity graph, time, standing statements), fusion, rerank, context.

Also the declarative query pipelines (query.py).

Nothing here writes. ``ReadView`` is what a read sees (a connection, the times and the
world it is confined to); the facade builds one per call.
"""
