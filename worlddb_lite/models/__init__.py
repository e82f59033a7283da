"""Models: the Embedder and Reranker protocols, the bundled static embedder, and world-vector pooling.

The bundled model's files live in the folder beside this module (package data, never downloaded).
"""
