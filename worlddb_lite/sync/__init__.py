"""Replicas brought together by hash, and stores carried as files.

``replicas`` syncs two stores and makes a replica; ``changeset`` is the file a sync sends; ``transfer``
exports and imports a store as JSON lines; ``rows`` and ``transfer_rows`` hold their SQL. A file from
another device is hostile input: every row is checked before one is applied.
"""
