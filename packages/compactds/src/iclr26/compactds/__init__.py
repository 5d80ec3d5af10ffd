"""iclr26-compactds: the datastore of "Frustratingly Simple Retrieval Improves Challenging,
Reasoning-Intensive Benchmarks" (CompactDS, ICLR 2026).

A multi-source passage store with an in-RAM faiss IVFPQ index, full-precision vectors and passage
text on disk, and an exact stage over the ANN candidates (``rerank="exact"`` from the memory-mapped
vectors, or ``"reencode"`` with a second encoder, as the released CompactDS does).
"""

from importlib.metadata import version as _version

from iclr26.compactds.builder import DatastoreBuilder
from iclr26.compactds.chunking import Chunker, Passage
from iclr26.compactds.datastore import Datastore, Hit
from iclr26.compactds.decontamination import Decontaminator
from iclr26.compactds.encoders import (
    Encoder,
    HashingEncoder,
    LSAEncoder,
    MiniLMEncoder,
    SentenceTransformerEncoder,
    load_encoder,
)
from iclr26.compactds.evaluation import evaluate, hit_at_k, ndcg_at_k, recall_at_k
from iclr26.compactds.index import IVFPQParams, auto_params
from iclr26.compactds.prompt import format_prompt, from_compactds_jsonl, to_compactds_jsonl
from iclr26.compactds.sharding import ShardedDatastore
from iclr26.compactds.store import SCHEMA_VERSION, StoreError

__version__ = _version("iclr26-compactds")

__all__ = [
    "SCHEMA_VERSION",
    "Chunker",
    "Datastore",
    "DatastoreBuilder",
    "Decontaminator",
    "Encoder",
    "HashingEncoder",
    "Hit",
    "IVFPQParams",
    "LSAEncoder",
    "MiniLMEncoder",
    "Passage",
    "SentenceTransformerEncoder",
    "ShardedDatastore",
    "StoreError",
    "__version__",
    "auto_params",
    "evaluate",
    "format_prompt",
    "from_compactds_jsonl",
    "hit_at_k",
    "load_encoder",
    "ndcg_at_k",
    "recall_at_k",
    "to_compactds_jsonl",
]
