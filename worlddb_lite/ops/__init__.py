"""Operations on a whole store.

Verify, purge, backup and checkpoint, re-embedding; the consolidator's steps (summaries, timelines, inference,
the contradiction sweep, near-duplicates, retention); sync, change sets, export and import.
"""
