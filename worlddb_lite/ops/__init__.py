"""Operations on a whole store: verify, purge, backup and checkpoint, re-embedding.

The consolidator's steps live in ``consolidate/``, sync, change sets, export and import in ``sync/``.
"""
