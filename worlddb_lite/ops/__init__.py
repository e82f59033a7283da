"""Operations on a whole store: verify the invariants, purge (right to be forgotten), backup and checkpoint."""
