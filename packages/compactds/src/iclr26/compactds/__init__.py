"""iclr26-compactds: the datastore of "Frustratingly Simple Retrieval Improves Challenging,
Reasoning-Intensive Benchmarks" (CompactDS, ICLR 2026).

A multi-source passage store with an in-RAM faiss IVFPQ index, full-precision vectors and passage
text on disk, and an exact stage over the ANN candidates (``rerank="exact"`` from the memory-mapped
vectors, or ``"reencode"`` with a second encoder, as the released CompactDS does).

The names below are imported on first use (``lazy_loader``), so ``import iclr26.compactds`` and
the command line's ``--help`` load neither faiss nor torch.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-compactds")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "builder": ["DatastoreBuilder"],
        "chunking": ["Chunker", "Passage"],
        "datastore": ["Datastore", "Hit"],
        "decontamination": ["Decontaminator"],
        "encoders": [
            "Encoder",
            "HashingEncoder",
            "LSAEncoder",
            "MiniLMEncoder",
            "SentenceTransformerEncoder",
            "load_encoder",
        ],
        "evaluation": ["evaluate", "hit_at_k", "ndcg_at_k", "recall_at_k"],
        "index": ["IVFPQParams", "auto_params"],
        "prompt": ["format_prompt", "from_compactds_jsonl", "to_compactds_jsonl"],
        "sharding": ["ShardedDatastore"],
        "store": ["SCHEMA_VERSION", "StoreError"],
    },
)
__all__ += ["__version__"]
