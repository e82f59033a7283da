"""The in-memory indexes over the store's rows, and what they need of a model.

``vector_index`` keeps the IVF cells of int8 codes (``ivf``) in step with ``node_vec``;
``world_vectors`` composes a world's vector from its members'; ``token_index`` codes a text's
content tokens; ``side_reader`` is the second read connection; ``embedder_record`` says which
embedder a store was written with. The SQL they read and write is the store's, one layer down.
"""
