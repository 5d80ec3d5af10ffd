"""The bundled multi-source mini corpus and its query families, and clustered synthetic vectors.

Real text that ships inside installed packages, so nothing is downloaded:

* ``wiki``: Wikipedia pages from gensim's test data (``[demo]`` extra), wikitext stripped;
* ``news``: the Lee background corpus (299 Australian news articles), also in gensim;
* ``pydoc``: CPython's own language-reference topics (``pydoc_data.topics``);
* ``numpy``: docstrings of numpy's public functions.

Each family has self-supervised queries: the lead sentence of a document (the wiki title is
prepended) is *removed* from the document and becomes the query, whose relevant document is the one
it came from; numpy's docstring summary line is the query for the rest of the docstring.
"""

from __future__ import annotations

import bz2
import html
import importlib.util
import inspect
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from iclr26.shared import check_int

__all__ = ["GENSIM_SOURCES", "Corpus", "clustered_vectors", "load_corpus"]

#: Sources read from gensim's test data (``[demo]`` extra).
GENSIM_SOURCES = ("wiki", "news")

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


@dataclass
class Corpus:
    """Documents per source and queries per family.

    Attributes:
        sources: ``{source: [(doc_id, text), ...]}``.
        queries: ``{family: [(query, relevant_doc_id), ...]}`` (family = source name).
    """

    sources: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    queries: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def n_words(self) -> dict[str, int]:
        return {s: sum(len(t.split()) for _, t in docs) for s, docs in self.sources.items()}


def _split_lead(text: str) -> tuple[str, str]:
    parts = _SENT.split(text.strip(), maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")


def _gensim_data() -> Path | None:
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data"
    return path if path.is_dir() else None


_WIKI_DROP = [
    (re.compile(r"<ref[^>]*/>", re.S), " "),
    (re.compile(r"<ref.*?</ref>", re.S), " "),
    (re.compile(r"<!--.*?-->", re.S), " "),
    (re.compile(r"<[^>]+>"), " "),
    (re.compile(r"\[\[(?:File|Image|Category):[^\]]*\]\]"), " "),
    (re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]"), r"\1"),
    (re.compile(r"\[https?://\S+\s?([^\]]*)\]"), r"\1"),
    (re.compile(r"'{2,}"), ""),
    (re.compile(r"^[=*#:;|!{].*$", re.M), " "),
]


def _strip_templates(text: str) -> str:
    out, depth, i = [], 0, 0
    while i < len(text):
        two = text[i : i + 2]
        if two == "{{":
            depth += 1
            i += 2
        elif two == "}}" and depth:
            depth -= 1
            i += 2
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


def _wiki_pages(path: Path, max_docs: int | None) -> list[tuple[str, str]]:
    with bz2.open(path) as f:
        raw = f.read().decode("utf-8")
    pages = []
    for title, body in re.findall(r"<title>(.*?)</title>.*?<text[^>]*>(.*?)</text>", raw, re.S):
        body = html.unescape(body)
        if body.lstrip().upper().startswith("#REDIRECT") or ":" in title:
            continue
        text = _strip_templates(body)
        for pat, rep in _WIKI_DROP:
            text = pat.sub(rep, text)
        text = re.sub(r"\s+", " ", text).strip()
        if len(text.split()) >= 100:
            pages.append((html.unescape(title), text))
        if max_docs is not None and len(pages) >= max_docs:
            break
    return pages


def _numpy_docs() -> list[tuple[str, str]]:
    out, seen = [], set()
    for name in sorted(dir(np)):
        if name.startswith("_"):
            continue
        obj = getattr(np, name, None)
        if not callable(obj) or id(obj) in seen:
            continue
        seen.add(id(obj))
        doc = inspect.getdoc(obj)
        if not doc or len(doc.split()) < 60:
            continue
        out.append((name, doc))
    return out


def _numpy_summary(doc: str) -> tuple[str, str]:
    paras = [p.strip() for p in doc.split("\n\n") if p.strip()]
    # numpy docstrings of C functions start with the signature line; skip it
    if (
        paras
        and "(" in paras[0].splitlines()[0]
        and paras[0].splitlines()[0].rstrip().endswith(")")
        and len(paras) > 1
    ):
        paras = paras[1:]
    return paras[0].replace("\n", " "), "\n\n".join(paras[1:])


def load_corpus(
    *,
    max_docs_per_source: int | None = None,
    sources: tuple[str, ...] = ("wiki", "news", "pydoc", "numpy"),
) -> Corpus:
    """Load the bundled corpus (deterministic).

    Args:
        max_docs_per_source: cap documents per source (first ones in a fixed order).
        sources: which sources; ``wiki`` and ``news`` need gensim (``[demo]`` extra). Without
            it they are skipped and a ``UserWarning`` says so (the corpus then has fewer sources
            and its numbers differ from the package README's); :data:`GENSIM_SOURCES` names them.
    """
    if max_docs_per_source is not None:
        check_int(max_docs_per_source, "max_docs_per_source", low=1)
    unknown = sorted(set(sources) - {"wiki", "news", "pydoc", "numpy"})
    if isinstance(sources, str) or unknown:
        raise ValueError(
            f"sources must be a tuple of 'wiki', 'news', 'pydoc', 'numpy'; got {sources!r}"
        )
    corpus = Corpus()
    cap = max_docs_per_source
    gdata = _gensim_data()
    skipped = [s for s in GENSIM_SOURCES if s in sources] if gdata is None else []
    if skipped:
        warnings.warn(
            f"the {' and '.join(skipped)} source(s) need gensim's test data, which is not installed: "
            f"using {len(sources) - len(skipped)} of {len(sources)} sources, so the numbers differ "
            "from the README's. pip install 'iclr26-compactds[demo]' for all of them",
            UserWarning,
            stacklevel=2,
        )

    def add(name: str, items: list[tuple[str, str, str]]) -> None:
        # items: (doc_key, query, body)
        items = [(k, " ".join(q.split()[:40]), b) for k, q, b in items]
        items = [(k, q, b) for k, q, b in items if q.strip() and len(b.split()) >= 30][:cap]
        corpus.sources[name] = [(f"{name}:{k}", b) for k, _, b in items]
        corpus.queries[name] = [(q, f"{name}:{k}") for k, q, _ in items]

    if "wiki" in sources and gdata is not None:
        pages = _wiki_pages(
            gdata / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2", cap
        )
        items = []
        for title, text in pages:
            lead, rest = _split_lead(text)
            items.append((title, f"{title}. {lead}", rest))
        add("wiki", items)
    if "news" in sources and gdata is not None:
        lines = (gdata / "lee_background.cor").read_text(encoding="latin-1").splitlines()
        add("news", [(str(i), *_split_lead(line)) for i, line in enumerate(lines) if line.strip()])
    if "pydoc" in sources:
        from pydoc_data.topics import topics

        items = []
        for key in sorted(topics):
            lines = topics[key].strip().splitlines()
            title = lines[0].strip() if lines else key
            body = "\n".join(ln for ln in lines[1:] if not set(ln.strip()) <= set("*=-"))
            lead, rest = _split_lead(re.sub(r"\s+", " ", body))
            items.append((key, f"{title}: {lead}", rest))
        add("pydoc", items)
    if "numpy" in sources:
        add("numpy", [(name, *_numpy_summary(doc)) for name, doc in _numpy_docs()])
    if not corpus.sources:
        raise ValueError(f"none of the sources {sources} is available (wiki/news need gensim)")
    return corpus


def clustered_vectors(
    n: int,
    dim: int = 384,
    *,
    n_clusters: int | None = None,
    n_queries: int = 200,
    decay: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Unit-norm float32 vectors from a Gaussian mixture with a decaying spectrum, plus queries
    drawn from the same mixture (not from the base set).

    Uniform random vectors make IVFPQ look far worse than on real embeddings (faiss PR #5254);
    a mixture with a decaying spectrum behaves like real sentence embeddings.

    Args:
        n: base vectors; dim: dimension; n_clusters: mixture components (default
            ``max(8, n // 50)``); n_queries: query vectors; decay: spectrum
            ``(1 + i) ** -decay`` of dimension i (larger = lower intrinsic dimension); seed.

    Returns:
        ``(base (n, dim), queries (n_queries, dim))``, float32.
    """
    n = check_int(n, "n", low=1)
    dim = check_int(dim, "dim", low=2)
    rng = np.random.default_rng(seed)
    c = n_clusters or max(8, n // 50)  # ~50 vectors per cluster: real local structure
    scale = (1.0 / (1 + np.arange(dim)) ** decay).astype(np.float32)  # decaying spectrum
    centers = rng.standard_normal((c, dim)).astype(np.float32) * scale * 3

    def draw(m: int) -> np.ndarray:
        out = np.empty((m, dim), np.float32)
        for lo in range(0, m, 100_000):
            hi = min(m, lo + 100_000)
            lab = rng.integers(0, c, hi - lo)
            out[lo:hi] = (
                centers[lab] + rng.standard_normal((hi - lo, dim)).astype(np.float32) * scale
            )
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    return draw(n), draw(check_int(n_queries, "n_queries", low=1))
