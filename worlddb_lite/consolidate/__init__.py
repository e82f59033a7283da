"""The consolidator: the sleep cycle's idempotent steps over what the write path stored.

``cycle`` runs them in order (the queue, summaries, timelines, inference, the contradiction sweep,
near-duplicates, retention); each step writes through the write path's ``Writer``.
"""
