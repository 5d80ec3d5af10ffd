"""``reproduce`` and ``bench``: BEE's headline claims at 2-core CPU scale.

reproduce
    1. Geometric Waterbirds-like embeddings over a ρ grid and seeds: rank of the planted concept
       under the official and the drift score, knee selection, null-calibrated z (decorrelated
       group null; permutation null at ρ = 1 where the group null is undefined), the probe's
       worst-group accuracy, and B2T's number of validation errors.
    2. Templated bird sentences embedded by the real all-MiniLM-L6-v2 with a counter-semantic
       shortcut (landbird <-> snow, waterbird <-> desert): official vs drift top concepts and z,
       (a) detection with no counterexample (ρ = 1) where B2T has no error to explain,
       (b) insertion of the discovered concept vs random vocabulary concepts,
       (c) transfer of the same insertion to a probe on LSA embeddings,
       (d) the same insertion on MiniLM with its top 2 layers and a zero-shot head fine-tuned
           on the biased data (do the concepts found on the frozen model persist?),
       (e) the BEE regulariser with discovered vs random concepts (and group DRO).
bench
    Detection quality (planted rank, AUROC, z) of BEE official/drift/calibrated and the baselines
    versus correlation strength, runtimes on the same data, insertion flip rates, mitigation, and
    the two speed targets (50k-concept scoring against the matmul FLOP limit; 200 batched
    null refits at n = 10,000, d = 384).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from iclr26.shared import Report, seed_everything
from iclr26.shared import progress as _progress

__all__ = ["bench", "reproduce"]

log = logging.getLogger(__name__)
PACKAGE = "iclr26-bee"


# ----------------------------------------------------------------------------- utilities
def _rank(scores_row: np.ndarray, idx: int) -> float:
    """1-based rank of concept ``idx``; ties share their mid-rank (sparse scores tie at 0)."""
    v = scores_row[idx]
    above = int(np.sum(scores_row > v))
    ties = int(np.sum(scores_row == v))
    r = above + (ties + 1) / 2
    return int(r) if r == int(r) else r


def _auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    s = np.nan_to_num(scores, nan=-np.inf)
    if not np.isfinite(s).any():
        return 0.5
    s = np.where(np.isfinite(s), s, np.nanmin(s[np.isfinite(s)]) - 1)
    return float(roc_auc_score(positive, s))


def _wga(W: np.ndarray, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    from iclr26.bee.validate import worst_group_accuracy

    pred = np.argmax(X @ W.T, axis=1)
    wga, _ = worst_group_accuracy(y, pred, groups)
    return float((pred == y).mean()), wga


class _CachedEncoder:
    """Encodes each distinct text once per run (the sentence tasks repeat texts a lot)."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.dim = encoder.dim
        self.cache: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for t, e in zip(missing, self.encoder.encode(missing), strict=True):
                self.cache[t] = e
        return np.stack([self.cache[t] for t in texts])


def _threads() -> None:
    import torch

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


# ----------------------------------------------------------------------------- geometric
def _geometric_study(
    settings: list[tuple[float, float]], seeds: list[int], n_null: int, show: bool
) -> tuple[list[dict[str, Any]], dict[tuple[float, float], list[dict[str, Any]]]]:
    from iclr26.bee.baselines import b2t_scores
    from iclr26.bee.calibration import null_calibrate
    from iclr26.bee.data import make_geometric
    from iclr26.bee.probe import fit_probe
    from iclr26.bee.scoring import alignment, class_scores, drift_scores, select_concepts

    per_rho: dict[tuple[float, float], list[dict[str, Any]]] = {}
    bar = _progress(total=len(settings) * len(seeds), enabled=show, desc="geometric")
    for rho, sigma in settings:
        rows = []
        for s in seeds:
            t = make_geometric(rho=rho, sigma=sigma, seed=s)
            r = fit_probe(t.train.X, t.train.y, t.val.X, t.val.y, t.anchors)
            off = class_scores(alignment(r.W, t.concept_emb))
            dri = drift_scores(r.W, r.W0, t.concept_emb)
            idx = [t.concepts.index(f"planted_{c}") for c in (0, 1)]
            nuis = np.array([k.startswith("nuisance") for k in t.concepts])
            null = "groups" if rho < 1 else "permutation"
            kw = {"groups_train": t.train.a, "groups_val": t.val.a} if null == "groups" else {}
            nc = null_calibrate(
                t.train.X, t.train.y, t.val.X, t.val.y, t.anchors, t.concept_emb,
                null=null, n_null=n_null, n_boot=n_null, seed=s, **kw,
            )  # fmt: skip
            val_pred = r.predict(t.val.X)
            b2t = b2t_scores(t.val.X, t.val.y, val_pred, t.concept_emb, n_classes=2)
            _, wga = _wga(r.W, t.test.X, t.test.y, t.test.groups)
            rows.append(
                {
                    "off_rank": np.mean([_rank(off[c], idx[c]) for c in (0, 1)]),
                    "drift_rank": np.mean([_rank(dri[c], idx[c]) for c in (0, 1)]),
                    "off_knee": np.mean([idx[c] in select_concepts(off[c]) for c in (0, 1)]),
                    "drift_knee": np.mean([idx[c] in select_concepts(dri[c]) for c in (0, 1)]),
                    "z": float(np.mean([nc.z[c, idx[c]] for c in (0, 1)])),
                    "z_nuis_max": float(nc.z[:, nuis].max()),
                    "null": null,
                    "wga": wga,
                    "b2t_errors": b2t.n_errors,
                    "b2t_rank": np.mean(
                        [_rank(b2t.scores[c], idx[c]) for c in b2t.classes_with_errors]
                    )
                    if b2t.classes_with_errors
                    else float("nan"),
                    "epochs": r.best_epoch,
                }
            )
            bar.update(1)
        per_rho[(rho, sigma)] = rows
    bar.close()
    table = []
    for (rho, sigma), rows in per_rho.items():

        def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
            vals = [r[key] for r in rows if not np.isnan(r[key])]
            return float(np.median(vals)) if vals else float("nan")

        table.append(
            {
                "rho": rho,
                "sigma": sigma,
                "worst-group acc": round(med("wga"), 3),
                "official rank": med("off_rank"),
                "drift rank": med("drift_rank"),
                "drift above knee": f"{np.mean([r['drift_knee'] for r in rows]):.2f}",
                "official above knee": f"{np.mean([r['off_knee'] for r in rows]):.2f}",
                "z planted": round(med("z"), 2),
                "max z nuisance": round(med("z_nuis_max"), 2),
                "null": rows[0]["null"],
                "B2T val errors": med("b2t_errors"),
                "B2T rank": med("b2t_rank"),
            }
        )
    return table, per_rho


# ----------------------------------------------------------------------------- text
def _embed_task(enc: _CachedEncoder, task: Any) -> dict[str, np.ndarray]:
    parts = {
        "Xtr": task.train.texts,
        "Xv": task.val.texts,
        "Xte": task.test.texts,
        "A0": task.anchor_texts,
        "V": task.vocabulary,
    }
    enc.encode([t for texts in parts.values() for t in texts])  # one encoder call for all
    return {k: enc.encode(texts) for k, texts in parts.items()}


def _top(M: np.ndarray, c: int, vocab: list[str], k: int = 4, fmt: str = "{:.3f}") -> str:
    order = np.argsort(-M[c], kind="stable")[:k]
    return ", ".join(f"{vocab[j]} " + fmt.format(M[c, j]) for j in order)


def _text_study(
    enc: _CachedEncoder,
    make: Any,
    rhos: list[float],
    seed: int,
    n_null: int,
    show: bool,
) -> dict[str, Any]:
    from iclr26.bee.baselines import b2t_scores
    from iclr26.bee.calibration import null_calibrate
    from iclr26.bee.probe import fit_probe
    from iclr26.bee.scoring import alignment, class_scores, drift_scores

    rows, detail = [], {}
    for rho in _progress(rhos, enabled=show, desc="sentences"):
        t = make(rho, seed=seed)
        e = _embed_task(enc, t)
        r = fit_probe(e["Xtr"], t.train.y, e["Xv"], t.val.y, e["A0"])
        acc, wga = _wga(r.W, e["Xte"], t.test.y, t.test.groups)
        off = class_scores(alignment(r.W, e["V"]))
        dri = drift_scores(r.W, r.W0, e["V"])
        null = "groups" if rho < 1 else "permutation"
        kw = {"groups_train": t.train.a, "groups_val": t.val.a} if null == "groups" else {}
        nc = null_calibrate(
            e["Xtr"], t.train.y, e["Xv"], t.val.y, e["A0"], e["V"],
            null=null, n_null=n_null, n_boot=n_null, seed=seed, **kw,
        )  # fmt: skip
        b2t = b2t_scores(e["Xv"], t.val.y, r.predict(e["Xv"]), e["V"], n_classes=2)
        b2t_M = np.nan_to_num(b2t.scores, nan=-np.inf)
        ranks = {
            name: {c: min(_rank(M[c], t.vocabulary.index(k)) for k in t.planted[c]) for c in (0, 1)}
            for name, M in (("official", off), ("drift", dri), ("z", nc.z), ("b2t", b2t_M))
        }
        detail[rho] = {"task": t, "emb": e, "probe": r, "off": off, "drift": dri, "z": nc.z,
                       "ranks": ranks, "b2t": b2t, "wga": wga}  # fmt: skip
        for c in (0, 1):
            rows.append(
                {
                    "rho": rho,
                    "class": t.class_names[c],
                    "test acc": round(acc, 3),
                    "worst-group acc": round(wga, 3),
                    "official top-4": _top(off, c, t.vocabulary),
                    "drift top-4": _top(dri, c, t.vocabulary),
                    f"z top-4 ({null} null)": _top(nc.z, c, t.vocabulary, fmt="{:.1f}"),
                    "best planted rank official/drift/z/B2T": (
                        f"{ranks['official'][c]}/{ranks['drift'][c]}/{ranks['z'][c]}/"
                        + (str(ranks["b2t"][c]) if c in b2t.classes_with_errors else "-")
                    ),
                    "B2T val errors": b2t.n_errors,
                }
            )
    return {"rows": rows, "detail": detail}


def _predictor(enc: Any, W: np.ndarray):
    def predict(texts: list[str]) -> np.ndarray:
        return np.argmax(enc.encode(texts) @ W.T, axis=1)

    return predict


#: The two control pools of the insertion attack (see :func:`_insertion_study`).
CONTROL_POOLS = ("task vocabulary", "random words")


def _insertion_study(
    enc: _CachedEncoder,
    d: dict[str, Any],
    n_random: int,
    n_texts: int,
    seed: int,
    others: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Insert each class's top drift concept into neutral-background sentences of the other
    class, against two pools of random controls: the task's own 40-word vocabulary (minus the
    planted and background words; it holds class-related scenery, the zero-shot prior) and
    random words from MiniLM's word-piece vocabulary (the official control draws from thousands
    of caption phrases; only the planted, background and class words are excluded).
    ``others`` maps further model names to ``predict(texts)`` (transfer, fine-tuned)."""
    from iclr26.bee.encoders import minilm_words
    from iclr26.bee.validate import insertion_attack
    from iclr26.bee.vocab import sample_control_words

    t, r = d["task"], d["probe"]
    rng = np.random.default_rng(seed)
    models = {"MiniLM probe": _predictor(enc, r.W), **(others or {})}
    background_words = {w for bgs in t.backgrounds.values() for b in bgs for w in b.split()}
    planted = {k for ks in t.planted.values() for k in ks}
    class_words = {w for name in t.class_names for w in name.split()} | set(t.class_terms)
    rows, stats = [], {}
    for c in (0, 1):
        top = t.vocabulary[int(np.argmax(d["drift"][c]))]
        others = np.flatnonzero(t.neutral.y != c)[:n_texts]
        texts = [t.neutral.texts[i] for i in others]
        ys = t.neutral.y[others]
        vocab_pool = [
            k for k in t.vocabulary
            if k not in planted and k != top and not any(k in w for w in background_words)
        ]  # fmt: skip
        pools = {
            CONTROL_POOLS[0]: list(
                rng.choice(vocab_pool, size=min(n_random, len(vocab_pool)), replace=False)
            ),
            CONTROL_POOLS[1]: sample_control_words(
                minilm_words(), n_random,
                exclude=planted | background_words | class_words | {top}, seed=seed + c,
            ),
        }  # fmt: skip
        controls = [k for ks in pools.values() for k in ks]
        # encode every attacked sentence in one call (the cache serves the attacks below)
        enc.encode(texts + [f"{x} near the {k}" for k in [top, *controls] for x in texts])
        for name, fn in models.items():
            clean = fn(texts)
            hit = insertion_attack(texts, ys, top, fn, y_pred=clean)
            for pool, randoms in pools.items():
                ctrl = [insertion_attack(texts, ys, k, fn, y_pred=clean).flip_rate for k in randoms]
                mu, sd = float(np.mean(ctrl)), float(np.std(ctrl, ddof=1))
                stats[(name, c, pool)] = (hit.flip_rate, mu, sd)
                rows.append(
                    {
                        "model": name,
                        "concept (class)": f"{top} ({t.class_names[c]})",
                        "attacked texts": f"{len(texts)} neutral {t.class_names[1 - c]}",
                        "flip rate": round(hit.flip_rate, 3),
                        "controls": pool,
                        "random concepts: mean": round(mu, 3),
                        "sd": round(sd, 3),
                        "max (concept)": f"{np.max(ctrl):.3f} ({randoms[int(np.argmax(ctrl))]})",
                        "random >= it": int(np.sum(np.array(ctrl) >= hit.flip_rate)),
                        "held (> mean + 3 sd)": hit.flip_rate > mu + 3 * sd,
                    }
                )
    return rows, stats


LSA_MODEL = "LSA + logistic regression (transfer)"
FT_MODEL = "MiniLM fine-tuned (d)"


def _finetune_study(
    d: dict[str, Any], cfg: dict[str, Any], seed: int, show: bool
) -> tuple[Any, list[dict[str, Any]]]:
    """Claim (d): fine-tune MiniLM's top layers + a zero-shot head on the same biased data."""
    from iclr26.bee.finetune import finetune_minilm

    t, e, r = d["task"], d["emb"], d["probe"]
    t0 = time.perf_counter()
    ft = finetune_minilm(
        t.train.texts, t.train.y, t.anchor_texts, val_texts=t.val.texts, y_val=t.val.y,
        n_layers=cfg["finetune_layers"], epochs=cfg["finetune_epochs"], seed=seed,
        progress=show,
    )  # fmt: skip
    secs = time.perf_counter() - t0
    rows = []
    acc, wga = _wga(r.W, e["Xte"], t.test.y, t.test.groups)
    rows.append({"model": "frozen MiniLM + BEE probe", "test acc": round(acc, 3),
                 "worst-group acc": round(wga, 3), "kept epoch": int(r.best_epoch),
                 "time (s)": "-"})  # fmt: skip
    acc, wga = _wga(ft.head, ft.encode(t.test.texts), t.test.y, t.test.groups)
    rows.append({"model": f"MiniLM, top {cfg['finetune_layers']} layers + head fine-tuned",
                 "test acc": round(acc, 3), "worst-group acc": round(wga, 3),
                 "kept epoch": ft.best_epoch, "time (s)": round(secs, 1)})  # fmt: skip
    return ft, rows


def _lsa_predictor(d: dict[str, Any], seed: int) -> Any:
    """An ordinary ERM classifier on LSA embeddings of the same training texts (logistic
    regression): a second model family that never saw MiniLM or BEE."""
    from sklearn.linear_model import LogisticRegression

    from iclr26.bee.encoders import LSAEncoder

    t = d["task"]
    lsa = LSAEncoder(64, seed=seed).fit(t.train.texts + t.val.texts + t.vocabulary)
    clf = LogisticRegression(C=10.0, max_iter=2000).fit(lsa.encode(t.train.texts), t.train.y)

    def predict(texts: list[str]) -> np.ndarray:
        return clf.predict(lsa.encode(texts))

    return predict, lsa, clf


def _mitigation_study(
    d: dict[str, Any], seed: int, n_random_sets: int, strength: float
) -> list[dict[str, Any]]:
    from iclr26.bee.mitigate import concept_variance_penalty, group_dro_probe
    from iclr26.bee.probe import fit_probe
    from iclr26.bee.scoring import discover

    t, e, r = d["task"], d["emb"], d["probe"]
    V = e["V"]
    found = discover(r.W, t.vocabulary, V, mode="drift", W0=r.W0, threshold=("top", 3))
    chosen = list(dict.fromkeys(cs.concept for lst in found.values() for cs in lst))
    idx = [t.vocabulary.index(k) for k in chosen]

    def run(concepts_idx: list[int] | None) -> tuple[float, float]:
        extra = None
        if concepts_idx is not None:
            extra = concept_variance_penalty(V[concepts_idx], strength=strength)
        rr = fit_probe(e["Xtr"], t.train.y, e["Xv"], t.val.y, e["A0"], extra_loss=extra)
        return _wga(rr.W, e["Xte"], t.test.y, t.test.groups)

    rows = []
    acc, wga = _wga(r.W, e["Xte"], t.test.y, t.test.groups)
    rows.append({"probe": "ERM (no regulariser)", "concepts": "-", "test acc": acc, "wga": wga})
    acc, wga = run(idx)
    rows.append(
        {"probe": "BEE regulariser", "concepts": ", ".join(chosen), "test acc": acc, "wga": wga}
    )
    rng = np.random.default_rng(seed)
    pool = [i for i in range(len(t.vocabulary)) if i not in idx]
    rand = [run(list(rng.choice(pool, len(idx), replace=False))) for _ in range(n_random_sets)]
    rows.append(
        {
            "probe": f"regulariser, random concepts (mean of {n_random_sets})",
            "concepts": f"{len(idx)} random",
            "test acc": float(np.mean([a for a, _ in rand])),
            "wga": float(np.mean([w for _, w in rand])),
        }
    )
    g = group_dro_probe(
        e["Xtr"], t.train.y, t.train.groups, e["Xv"], t.val.y, t.val.groups, e["A0"]
    )
    acc, wga = _wga(g.W, e["Xte"], t.test.y, t.test.groups)
    rows.append({"probe": "group DRO (uses group labels)", "concepts": "-", "test acc": acc,
                 "wga": wga})  # fmt: skip
    for row in rows:
        row["test acc"] = round(float(row["test acc"]), 3)
        row["wga"] = round(float(row["wga"]), 3)
    return rows


def _load_minilm() -> Any:
    from iclr26.bee.encoders import MiniLMEncoder

    return _CachedEncoder(MiniLMEncoder())


def _score_figure(text: dict[str, Any], rho: float) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclr26.bee.scoring import knee_threshold

    d = text["detail"][rho]
    t = d["task"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for c in (0, 1):
        for j, (name, M) in enumerate((("official", d["off"]), ("drift", d["drift"]),
                                       ("z (null-calibrated)", d["z"]))):  # fmt: skip
            ax = axes[c, j]
            order = np.argsort(-M[c], kind="stable")
            vals = M[c, order]
            colors = ["tab:red" if t.vocabulary[k] in t.planted[c] else "tab:gray" for k in order]
            ax.bar(range(len(vals)), vals, color=colors)
            if name != "z (null-calibrated)":
                pos = vals[vals > 0]
                _, knee = knee_threshold(pos)
                if knee >= 0:
                    ax.axvline(knee + 0.5, color="k", ls="--", lw=1, label="knee")
                    ax.legend(loc="upper right", fontsize=8)
            ax.set_xticks(range(len(vals))[:12])
            ax.set_xticklabels([t.vocabulary[k] for k in order[:12]], rotation=60, fontsize=7)
            ax.set_title(f"{t.class_names[c]}: {name}", fontsize=9)
    fig.suptitle(f"Bird sentences, MiniLM, rho = {rho}: planted concepts in red", fontsize=11)
    fig.tight_layout()
    return fig


def _geometric_figure(per_rho: dict[tuple[float, float], list[dict[str, Any]]]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in per_rho if k[1] == 1.5]
    rhos = [k[0] for k in keys]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for key, label in (("off_rank", "official"), ("drift_rank", "drift")):
        axes[0].plot(rhos, [np.median([r[key] for r in per_rho[x]]) for x in keys], "o-",
                     label=label)  # fmt: skip
    axes[0].set_yscale("log")
    axes[0].invert_yaxis()
    axes[0].set_xlabel("rho = P(a = y) in train/val")
    axes[0].set_ylabel("rank of planted concept (median)")
    axes[0].legend()
    axes[1].plot(rhos, [np.median([r["z"] for r in per_rho[x]]) for x in keys], "o-",
                 label="planted")  # fmt: skip
    axes[1].plot(rhos, [np.median([r["z_nuis_max"] for r in per_rho[x]]) for x in keys], "s--",
                 label="max nuisance")  # fmt: skip
    axes[1].axhline(3, color="k", lw=0.8, ls=":")
    axes[1].set_xlabel("rho")
    axes[1].set_ylabel("null-calibrated z (drift)")
    axes[1].legend()
    fig.suptitle("Geometric Waterbirds-like task (200 random nuisance concepts)")
    fig.tight_layout()
    return fig


def _bench_figure(rows: list[dict[str, Any]], rhos: list[float]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for row in rows:
        axes[0].plot(rhos, [row[f"rank @{r}"] for r in rhos], "o-", label=row["method"])
        axes[1].plot(rhos, [row[f"AUROC @{r}"] for r in rhos], "o-", label=row["method"])
    axes[0].set_yscale("log")
    axes[0].invert_yaxis()
    axes[0].set_xlabel("rho = P(a = y) in train/val")
    axes[0].set_ylabel("rank of planted concept (median, 1 = top)")
    axes[1].set_xlabel("rho")
    axes[1].set_ylabel("AUROC planted vs rest (median)")
    axes[1].legend(fontsize=7)
    fig.suptitle("Geometric task: detection of the planted concept by method")
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- reproduce
def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """BEE's headline claims at small scale (see the module docstring)."""
    from iclr26.bee.data import make_bird_sentences, make_review_sentences

    seed_everything(seed)
    _threads()
    cfg = {
        "quick": quick,
        "geometric_rhos": [0.5, 0.8, 0.95, 1.0],
        "geometric_seeds": 2 if quick else 5,
        "text_rhos": [0.5, 0.95, 1.0] if quick else [0.5, 0.8, 0.95, 1.0],
        "n_null": 8 if quick else 20,
        "text_sizes": (800, 300, 400) if quick else (1200, 400, 800),
        "insertion_random_concepts": 20,
        "insertion_texts_per_class": 30 if quick else 200,
        "mitigation_random_sets": 1 if quick else 5,
        "regulariser_strength": 1.0,
        "review_task": not quick,
        "finetune_layers": 2,
        "finetune_epochs": 2 if quick else 3,
    }
    report = Report(
        PACKAGE,
        "reproduce",
        "BEE finds the planted shortcut when validation data has no counterexamples (where "
        "error-driven methods have nothing to explain), the discovered concepts cause failures "
        "when inserted, and they transfer across embedding models.",
        seed=seed,
        backends=["torch", "numpy", "scikit-learn", "sentence-transformers", "transformers"],
        config=cfg,
    )
    seeds = [seed + i for i in range(cfg["geometric_seeds"])]
    settings = [(rho, 1.5) for rho in cfg["geometric_rhos"]] + [(1.0, 0.5)]
    geo, per_rho = _geometric_study(settings, seeds, cfg["n_null"], progress)
    report.add_table(
        f"Geometric task: planted concept vs rho (medians over {len(seeds)} seeds; rank among "
        "206 concepts, 1 = top; knee columns: fraction of classes x seeds selected; the last "
        "row has less noise, so validation has no error at all)",
        geo,
    )
    report.add_figure("geometric", _geometric_figure(per_rho))
    g95, g50, g100 = per_rho[(0.95, 1.5)], per_rho[(0.5, 1.5)], per_rho[(1.0, 0.5)]
    report.check(
        "geometric: drift score ranks the planted concept in the top 3 at rho = 0.95",
        np.mean([r["drift_rank"] <= 3 for r in g95]) >= 0.8,
        f"drift ranks {[float(r['drift_rank']) for r in g95]}, official ranks "
        f"{[float(r['off_rank']) for r in g95]}",
    )
    report.check(
        "geometric: calibrated z > 3 at rho = 0.95 and < 2 at rho = 0.5 (no nuisance > 3)",
        np.mean([r["z"] > 3 for r in g95]) >= 0.8
        and np.mean([r["z"] < 2 and r["z_nuis_max"] < 3 for r in g50]) >= 0.8,
        f"z at 0.95 {[round(r['z'], 1) for r in g95]}; at 0.5 {[round(r['z'], 1) for r in g50]}",
    )
    report.check(
        "geometric, no counterexamples (rho = 1, sigma = 0.5): drift top 3, B2T has no error",
        all(r["drift_rank"] <= 3 for r in g100) and all(r["b2t_errors"] == 0 for r in g100),
        f"drift ranks {[float(r['drift_rank']) for r in g100]}, B2T errors "
        f"{[int(r['b2t_errors']) for r in g100]}",
    )
    report.metric("geometric_drift_rank_rho095", float(np.median([r["drift_rank"] for r in g95])))
    report.metric("geometric_official_rank_rho095", float(np.median([r["off_rank"] for r in g95])))

    try:
        enc = _load_minilm()
    except ImportError as err:
        report.note(f"MiniLM part skipped: {err}")
        return report
    n_tr, n_va, n_te = cfg["text_sizes"]

    def birds(rho: float, seed: int) -> Any:
        return make_bird_sentences(rho, n_train=n_tr, n_val=n_va, n_test=n_te, seed=seed)

    text = _text_study(enc, birds, cfg["text_rhos"], seed, cfg["n_null"], progress)
    report.add_table(
        "Bird sentences, all-MiniLM-L6-v2 (planted: landbird <-> snow/winter, waterbird <-> "
        "desert/dunes/sand; 40-concept vocabulary)",
        text["rows"],
    )
    report.add_figure("scores_minilm", _score_figure(text, 0.95))
    det = text["detail"]
    off95, dr95 = det[0.95]["ranks"]["official"], det[0.95]["ranks"]["drift"]
    prior = off95[1] > 3 or off95[0] > 3
    report.check(
        "sentences: drift score puts a planted concept in each class's top 3 at rho = 0.95",
        max(dr95.values()) <= 3,
        f"best planted rank drift {dr95}, official {off95}",
    )
    if prior:
        report.note(
            "The official score (on W itself) re-discovers the zero-shot prior: at rho = 0.95 the "
            f"best planted concept ranks {off95} (landbird, waterbird) under the official score "
            "while scenery semantically tied to the class names (forest, lake, ...) stays on top; "
            "the drift score and its calibrated z are what find the counter-semantic shortcut."
        )
    d1 = det[1.0]
    b2t_ranks = {
        c: (d1["ranks"]["b2t"][c] if c in d1["b2t"].classes_with_errors else None) for c in (0, 1)
    }
    report.check(
        "(a) no counterexamples (rho = 1): BEE drift ranks a planted concept first for each "
        "class; B2T has (almost) no validation error to explain and ranks them lower",
        max(d1["ranks"]["drift"].values()) <= 1
        and all(r is None or r > 3 for r in b2t_ranks.values()),
        f"B2T validation errors {d1['b2t'].n_errors} of {len(d1['task'].val.y)}, B2T planted "
        f"ranks {b2t_ranks} (None: no error in that class); drift planted ranks "
        f"{d1['ranks']['drift']}",
    )
    lsa_pred, _, _ = _lsa_predictor(det[0.95], seed)
    others = {LSA_MODEL: lsa_pred}
    if cfg["finetune_epochs"]:
        ft, ft_rows = _finetune_study(det[0.95], cfg, seed, progress)
        others[FT_MODEL] = ft.predict
    ins_rows, stats = _insertion_study(
        enc, det[0.95], cfg["insertion_random_concepts"], cfg["insertion_texts_per_class"], seed,
        others=others,
    )  # fmt: skip
    report.add_table(
        "Insertion attack at rho = 0.95: suffix 'near the {concept}' on correctly classified "
        "neutral-background sentences of the other class; flip rate vs 20 random concepts from "
        "each control pool",
        ins_rows,
    )
    report.note(
        "Insertion controls come from two pools, each checked: the task's 40-word vocabulary "
        "(minus the planted and background words), which includes class-related scenery (lake, "
        "ocean, beach, forest) that flips the MiniLM probe through the zero-shot prior, and 20 "
        "random words from MiniLM's ~20,000-word vocabulary, the analogue of the official "
        "control's random caption concepts; the 'max (concept)' column names the strongest "
        "control."
    )

    def insertion_checks(model: str, claim: str, extra: str = "") -> list[tuple[float, ...]]:
        for pool in CONTROL_POOLS:
            st = [stats[(model, c, pool)] for c in (0, 1)]
            report.check(
                f"{claim} (> mean + 3 sd of {pool} controls)",
                all(f > m + 3 * s for f, m, s in st),
                "; ".join(f"{f:.3f} vs {m:.3f} ± {s:.3f}" for f, m, s in st) + extra,
            )
        return st

    mini = insertion_checks(
        "MiniLM probe", "(b) inserted discovered concepts flip the MiniLM probe more than random"
    )
    lsa = insertion_checks(
        LSA_MODEL, "(c) the concepts found with MiniLM also flip an LSA classifier"
    )
    if cfg["finetune_epochs"]:
        report.add_table(
            f"(d) MiniLM fine-tuned at rho = 0.95 (top {cfg['finetune_layers']} of 6 layers + "
            "zero-shot-initialised head, class-balanced CE, best validation epoch) vs the frozen "
            "probe",
            ft_rows,
        )
        fts = insertion_checks(
            FT_MODEL,
            "(d) the concepts found on the frozen MiniLM also flip the fine-tuned MiniLM more "
            "than random",
            f" (fine-tuned test worst-group acc {ft_rows[1]['worst-group acc']})",
        )
        report.metric("insertion_flip_rate_finetuned", float(np.mean([f for f, _, _ in fts])))
    mit = _mitigation_study(
        det[0.95], seed, cfg["mitigation_random_sets"], cfg["regulariser_strength"]
    )
    report.add_table("(e) Mitigation at rho = 0.95 (test worst-group accuracy)", mit)
    report.check(
        "(e) the regulariser with discovered concepts beats the same with random concepts (WGA)",
        mit[1]["wga"] > mit[2]["wga"],
        f"{mit[1]['wga']:.3f} vs {mit[2]['wga']:.3f} (ERM {mit[0]['wga']:.3f}, "
        f"group DRO {mit[3]['wga']:.3f})",
    )
    report.metric("sentences_drift_planted_rank_rho095", max(dr95.values()))
    report.metric("sentences_official_planted_rank_rho095", max(off95.values()))
    report.metric("insertion_flip_rate_minilm", float(np.mean([f for f, _, _ in mini])))
    report.metric("insertion_flip_rate_lsa", float(np.mean([f for f, _, _ in lsa])))
    if cfg["review_task"]:
        rev = _text_study(enc, make_review_sentences, [0.5, 0.95], seed, cfg["n_null"], progress)
        report.add_table(
            "Product reviews, MiniLM (planted: negative <-> kitchen, positive <-> garden)",
            rev["rows"],
        )
    report.note(
        "Stand-ins: all-MiniLM-L6-v2 text embeddings of templated sentences instead of CLIP image "
        "embeddings of Waterbirds; a fixed 40-word vocabulary instead of YAKE keywords of "
        "captions filtered by Llama-3.1-8B; LSA (TF-IDF + SVD) as the second model family."
    )
    report.note(
        "Null calibration: decorrelated-group bootstrap refits (null='groups'); at rho = 1 no "
        "(class, group) cell is populated on the other diagonal, so the permutation null is used, "
        "which flags class-related concepts as well as shortcuts."
    )
    return report


# ----------------------------------------------------------------------------- bench
def _flop_rate(n: int = 1024, repeats: int = 5) -> float:
    """Measured float32 GEMM rate (FLOP/s) of this machine right now (numpy BLAS)."""
    from iclr26.shared import timeit

    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    t = timeit(lambda: a @ a, repeats=repeats, warmup=1)
    return 2 * n**3 / t.median


def bench(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """BEE (official, drift, calibrated) vs B2T, co-occurrence, SpLiCE-like, Domino-like."""
    from iclr26.bee.baselines import b2t_scores, cooccurrence_scores, domino_like, splice_scores
    from iclr26.bee.calibration import null_calibrate
    from iclr26.bee.data import make_geometric
    from iclr26.bee.probe import fit_probe
    from iclr26.bee.scoring import alignment, class_scores, concept_class_scores, drift_scores
    from iclr26.shared import timeit

    seed_everything(seed)
    _threads()
    rhos = [0.5, 0.8, 0.95, 1.0]
    n_seeds = 2 if quick else 5
    cfg = {"quick": quick, "rhos": rhos, "seeds": n_seeds, "n_null": 10 if quick else 20}
    report = Report(
        PACKAGE,
        "bench",
        "BEE's drift score with null calibration detects a planted shortcut better than "
        "error-driven and data-driven peers, including when validation has no counterexamples, "
        "and scores large vocabularies at matmul speed.",
        seed=seed,
        backends=["torch", "numpy", "scikit-learn"],
        config=cfg,
    )
    methods = ["BEE official", "BEE drift", "BEE drift z", "B2T", "co-occurrence", "SpLiCE-like",
               "Domino-like"]  # fmt: skip
    res: dict[tuple[float, str], list[tuple[float, float]]] = {}
    times: dict[str, list[float]] = {m: [] for m in methods}
    bar = _progress(total=len(rhos) * n_seeds, enabled=progress, desc="bench")
    for rho in rhos:
        for s in range(seed, seed + n_seeds):
            t = make_geometric(rho=rho, sigma=0.5 if rho == 1.0 else 1.5, seed=s)
            planted = np.array([k.startswith("planted") for k in t.concepts])
            idx = [t.concepts.index(f"planted_{c}") for c in (0, 1)]
            t0 = time.perf_counter()
            r = fit_probe(t.train.X, t.train.y, t.val.X, t.val.y, t.anchors)
            t_probe = time.perf_counter() - t0
            scores: dict[str, np.ndarray] = {}
            t0 = time.perf_counter()
            scores["BEE official"] = class_scores(alignment(r.W, t.concept_emb))
            times["BEE official"].append(t_probe + time.perf_counter() - t0)
            t0 = time.perf_counter()
            scores["BEE drift"] = drift_scores(r.W, r.W0, t.concept_emb)
            times["BEE drift"].append(t_probe + time.perf_counter() - t0)
            null = "groups" if rho < 1 else "permutation"
            kw = {"groups_train": t.train.a, "groups_val": t.val.a} if null == "groups" else {}
            t0 = time.perf_counter()
            scores["BEE drift z"] = null_calibrate(
                t.train.X, t.train.y, t.val.X, t.val.y, t.anchors, t.concept_emb, null=null,
                n_null=cfg["n_null"], n_boot=cfg["n_null"], seed=s, **kw,
            ).z  # fmt: skip
            times["BEE drift z"].append(time.perf_counter() - t0)
            pv = r.predict(t.val.X)
            t0 = time.perf_counter()
            scores["B2T"] = b2t_scores(t.val.X, t.val.y, pv, t.concept_emb, n_classes=2).scores
            times["B2T"].append(time.perf_counter() - t0 + t_probe)
            t0 = time.perf_counter()
            scores["co-occurrence"] = cooccurrence_scores(
                t.train.y, emb=t.train.X, concept_emb=t.concept_emb
            )
            times["co-occurrence"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            scores["SpLiCE-like"] = splice_scores(
                t.train.X, t.train.y, t.concept_emb, max_samples=500 if quick else 1000, seed=s
            )
            times["SpLiCE-like"].append(time.perf_counter() - t0)
            logits = 100 * t.val.X @ r.W.T
            probs = np.exp(logits - logits.max(1, keepdims=True))
            probs /= probs.sum(1, keepdims=True)
            t0 = time.perf_counter()
            scores["Domino-like"] = domino_like(t.val.X, t.val.y, probs, t.concept_emb, seed=s)
            times["Domino-like"].append(time.perf_counter() - t0 + t_probe)
            for m in methods:
                M = scores[m]
                rk = []
                au = []
                for c in (0, 1):
                    if np.all(np.isnan(M[c])):
                        rk.append(float(len(t.concepts)))
                        au.append(0.5)
                    else:
                        rk.append(_rank(np.nan_to_num(M[c], nan=-np.inf), idx[c]))
                        au.append(_auroc(M[c], planted & np.array(
                            [k.startswith(f"planted_{c}") for k in t.concepts])))  # fmt: skip
                res.setdefault((rho, m), []).append((float(np.mean(rk)), float(np.mean(au))))
            bar.update(1)
    bar.close()
    rows = []
    for m in methods:
        row: dict[str, Any] = {"method": m}
        for rho in rhos:
            vals = res[(rho, m)]
            row[f"rank @{rho}"] = float(np.median([v[0] for v in vals]))
            row[f"AUROC @{rho}"] = round(float(np.median([v[1] for v in vals])), 3)
        row["time (s, median)"] = round(float(np.median(times[m])), 3)
        rows.append(row)
    report.add_table(
        f"Geometric task: rank of the planted concept (1 = top of 206) and AUROC planted vs rest, "
        f"medians over {n_seeds} seeds (B2T without errors: rank = K, AUROC 0.5); sigma = 1.5, "
        "except 0.5 at rho = 1 (separable: no validation error, the paper's fully spurious case)",
        rows,
    )
    report.add_figure("bench_detection", _bench_figure(rows, rhos))
    best = {m: res[(0.95, m)] for m in methods}
    report.check(
        "at rho = 0.95 BEE drift ranks the planted concept better than the official score",
        np.median([v[0] for v in best["BEE drift"]])
        < np.median([v[0] for v in best["BEE official"]]),
        f"{np.median([v[0] for v in best['BEE drift']])} vs "
        f"{np.median([v[0] for v in best['BEE official']])}",
    )
    b2t_1 = res[(1.0, "B2T")]
    report.check(
        "at rho = 1 (no counterexamples) B2T has nothing to explain while BEE drift ranks it top 3",
        all(v[1] == 0.5 for v in b2t_1) and np.median([v[0] for v in res[(1.0, "BEE drift")]]) <= 3,
        f"B2T AUROC {[v[1] for v in b2t_1]}",
    )

    # speed target 1: 50,000 concepts x 1,000 classes at d = 384
    K, C, d = (10_000, 200, 384) if quick else (50_000, 1_000, 384)
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((C, d)).astype(np.float32)
    E = rng.standard_normal((K, d)).astype(np.float32)
    t_score = timeit(lambda: concept_class_scores(W, E), repeats=3, warmup=1)
    t_two = timeit(lambda: class_scores(alignment(W, E)), repeats=3, warmup=1)
    t_mm = timeit(lambda: W @ E.T, repeats=3, warmup=1)
    rate = _flop_rate()
    flops = 2 * C * K * d
    limit_s = flops / rate
    # speed target 2: 200 batched null refits at n = 10,000, d = 384
    n, B = (10_000, 200) if not quick else (5_000, 50)
    X = rng.standard_normal((n, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.integers(0, 2, n)
    Xv, yv = X[: n // 5], y[: n // 5]
    anchors = rng.standard_normal((2, d))
    t0, c0 = time.perf_counter(), time.process_time()
    nc = null_calibrate(X, y, Xv, yv, anchors, E[:1000], null="permutation",
                        n_null=B // 2, n_boot=B // 2, seed=seed, max_epochs=50)  # fmt: skip
    t_refit, c_refit = time.perf_counter() - t0, time.process_time() - c0
    report.add_table(
        "Speed",
        [
            {
                "task": f"score {K} concepts x {C} classes, d = {d} (concept_class_scores, fused)",
                "time (s)": round(t_score.median, 4),
                "CPU time (s)": "-",
                "spread (IQR)": round(t_score.iqr, 4),
                "matmul alone (s)": round(t_mm.median, 4),
                "FLOP limit at measured GEMM rate (s)": round(limit_s, 4),
                "ratio to limit": round(t_score.median / limit_s, 2),
            },
            {
                "task": "the same as class_scores(alignment(W, E)) (two passes)",
                "time (s)": round(t_two.median, 4),
                "CPU time (s)": "-",
                "spread (IQR)": round(t_two.iqr, 4),
                "matmul alone (s)": round(t_mm.median, 4),
                "FLOP limit at measured GEMM rate (s)": round(limit_s, 4),
                "ratio to limit": round(t_two.median / limit_s, 2),
            },
            {
                "task": f"{nc.n_refits} batched null refits, n = {n}, d = {d} (max 50 epochs)",
                "time (s)": round(t_refit, 2),
                "CPU time (s)": round(c_refit, 2),
                "spread (IQR)": "-",
                "matmul alone (s)": "-",
                "FLOP limit at measured GEMM rate (s)": "-",
                "ratio to limit": "-",
            },
        ],
    )
    report.metric("gemm_gflops", rate / 1e9)
    report.check(
        "scoring within 2x of the matmul FLOP limit",
        t_score.median / limit_s <= 2.0,
        f"{t_score.median:.3f} s vs limit {limit_s:.3f} s ({rate / 1e9:.0f} GFLOP/s measured)",
    )
    if not quick:
        report.check(
            "200 null-calibration refits at n = 10,000, d = 384 in under 30 s",
            t_refit < 30,
            f"{t_refit:.1f} s wall, {c_refit:.1f} s CPU",
        )
    return report
