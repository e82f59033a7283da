"""The write path, the one door for every memory.

System 1 stores the text verbatim and indexes it; System 2 extracts entities and facts,
resolves identities and reconciles facts (supersession, contradiction, same_as proposals).
Everything here works on a transaction of the reconciler and on the store, never on the facade.
"""
