import json

import pytest

from iclr26.compactds.cli import main


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory, text_corpus):
    root = tmp_path_factory.mktemp("cli")
    src = root / "pydoc.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": d, "text": t}) + "\n" for d, t in text_corpus.sources["pydoc"][:40]
        )
    )
    folder = root / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("The faiss library performs vector search. " * 30)
    (folder / "b.txt").write_text("Bushfires burned near Sydney this summer. " * 30)
    queries = root / "q.jsonl"
    qs = text_corpus.queries["pydoc"][:5]
    queries.write_text(
        "".join(
            json.dumps({"id": str(i), "query": q, "doc_ids": [d]}) + "\n"
            for i, (q, d) in enumerate(qs)
        )
    )
    return root, src, folder, queries


def test_build_search_eval_round_trip(cli_store, capsys):
    root, src, folder, queries = cli_store
    store = root / "store"
    assert main(["build", str(src), str(folder), "--out", str(store), "--encoder", "lsa", "--dim", "32",
                 "--chunk-words", "64", "--threads", "1"]) == 0  # fmt: skip
    stats = json.loads(capsys.readouterr().out)
    assert set(stats["counts"]) == {"pydoc", "notes"}
    assert main(["search", str(store), "Sydney bushfires", "-k", "1", "--sources", "notes"]) == 0
    hit = json.loads(capsys.readouterr().out)["hits"][0]
    assert "Bushfires" in hit["text"]
    assert main(["search", str(store), "vector search library", "-k", "2", "--prompt"]) == 0
    assert capsys.readouterr().out.strip().endswith("vector search library")
    out = root / "ctxs.jsonl"
    assert main(["search", str(store), "--queries", str(queries), "--out", str(out)]) == 0
    capsys.readouterr()
    assert len(out.read_text().splitlines()) == 5
    assert "ctxs" in json.loads(out.read_text().splitlines()[0])
    assert main(["eval", str(store), "--queries", str(queries), "--ks", "1,5"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["recall@5"] >= 0.8
    assert "hit@5" in ev


def test_cli_errors_are_one_line(cli_store, capsys, tmp_path):
    _, src, _, _ = cli_store
    assert main(["search", str(tmp_path / "missing"), "q"]) == 2
    assert "missing does not exist" in capsys.readouterr().err
    assert main(["build", str(src), "--out", str(tmp_path / "s"), "--encoder", "bogus"]) == 2
    assert "--encoder" in capsys.readouterr().err
