"""The Ray Data build path on a local Ray instance gives the same store as the in-process build."""

import pytest

from iclr26.compactds import Chunker, DatastoreBuilder, HashingEncoder
from iclr26.compactds.ray_build import build_with_ray


def _builder(path, text_corpus):
    b = DatastoreBuilder(path, HashingEncoder(64), chunker=Chunker(64), shard_size=300, threads=1)
    for name, docs in text_corpus.sources.items():
        b.add_source(name, docs[:80])
    return b


@pytest.mark.slow
def test_ray_build_equals_single_process_build(tmp_path, text_corpus):
    pytest.importorskip("ray")
    ref = _builder(tmp_path / "ref", text_corpus).build()
    ray_store = build_with_ray(_builder(tmp_path / "ray", text_corpus), concurrency=2, num_cpus=2)

    def files(root):
        return {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    assert files(tmp_path / "ref") == files(tmp_path / "ray")
    assert ray_store.n == ref.n
    assert len(ref.meta["passage_files"]) >= 3
