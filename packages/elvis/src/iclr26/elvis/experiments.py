"""``reproduce`` and ``bench``: the paper's headline claim on the bundled paste-in-clutter benchmark.

Both train ELViS and AMES-lite on photo instances (random crops, fresh pastes), then re-rank a
global-VLAD shortlist of an in-domain split (held-out pastes of the photo images) and an
out-of-domain split (science + documents) with every method, through the same :func:`rerank`.
Plain functions returning :class:`iclr26.shared.Report`.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from iclr26.elvis.baselines import AMESLite, mnn_count, ratio_magsac_inliers
from iclr26.elvis.data import (
    DOCS,
    PHOTO,
    SCIENCE,
    RetrievalSet,
    make_retrieval_set,
    make_training_pairs,
    stereo_pair,
)
from iclr26.elvis.features import LocalFeatures, extract_sift, pad_batch
from iclr26.elvis.global_desc import VLAD
from iclr26.elvis.metrics import (
    REVISITED_PROTOCOLS,
    average_precision,
    map_at_k,
    mean_average_precision,
    revisited_map,
)
from iclr26.elvis.model import ELViS
from iclr26.elvis.ot import dustbin_transport
from iclr26.elvis.rerank import rerank
from iclr26.elvis.train import fit
from iclr26.shared import Report, seed_everything, timeit
from iclr26.shared import progress as progress_bar

__all__ = ["bench", "reproduce"]

PACKAGE = "iclr26-elvis"
BACKENDS = ("torch", "opencv-python-headless", "scikit-image", "scikit-learn", "matplotlib")
CLAIM = (
    "Trained on one domain, ELViS re-ranking beats global retrieval and correspondence counting, "
    "holds up out of domain better than a representation-space re-ranker, and costs a fraction of it."
)
N_FEATURES = 256
TEMPERATURE = 10.0
GAIN_INIT = 0.7
LAM, T = 0.5, "auto"
TOP_K = 40

Scorer = Callable[[Sequence[LocalFeatures], Sequence[LocalFeatures]], np.ndarray]


def _sift(images, progress: bool, desc: str) -> list[LocalFeatures]:
    return [
        extract_sift(im, N_FEATURES) for im in progress_bar(images, enabled=progress, desc=desc)
    ]


@dataclass
class _Split:
    data: RetrievalSet
    q: list[LocalFeatures]
    db: list[LocalFeatures]
    sims: np.ndarray


@dataclass
class _World:
    splits: dict[str, _Split]
    pairs: list
    elvis: ELViS
    untrained: ELViS
    ames: AMESLite
    elvis_loss: list[float]
    ames_loss: list[float]
    fit_s: dict[str, float]


def _build(quick: bool, seed: int, progress: bool, shifts: Sequence[str] = ()) -> _World:
    """Data, features, VLAD shortlist sims, and the two trained re-rankers for one seed."""
    seed_everything(seed)
    n_train_sets = 2 if quick else 6
    train_q, train_db, pairs = [], [], []
    for k in range(n_train_sets):
        tr = make_retrieval_set(PHOTO, random_crops=True, n_distractors=4, seed=seed * 1000 + k)
        qf = _sift(tr.queries, progress, "train queries")
        df = _sift(tr.database, progress, "train database")
        train_q += qf
        train_db += df
        pairs += make_training_pairs(qf, df, tr.relevant, neg_per_pos=1, seed=seed * 1000 + k)
    vlad = VLAD(32, seed=seed).fit(train_q + train_db)
    specs = {"in-domain": (PHOTO, "none"), "out-of-domain": (SCIENCE + DOCS, "none")}
    for shift in shifts:
        specs[f"ood+{shift}"] = (SCIENCE + DOCS, shift)
    splits = {}
    for i, (name, (names, shift)) in enumerate(specs.items()):
        data = make_retrieval_set(names, shift=shift, n_distractors=10, seed=seed * 1000 + 500 + i)
        q = _sift(data.queries, progress, f"{name} queries")
        db = _sift(data.database, progress, f"{name} database")
        splits[name] = _Split(data, q, db, vlad.encode(q) @ vlad.encode(db).T)

    epochs = 5 if quick else 10
    untrained = ELViS(128, temperature=TEMPERATURE).init_untrained_(gain=GAIN_INIT, seed=seed)
    elvis = copy.deepcopy(untrained).warm_start_head_(pairs)
    t0 = time.perf_counter()
    h_e = fit(elvis, pairs, epochs=epochs, batch_size=32, lr=2e-3, seed=seed, progress=progress)
    t1 = time.perf_counter()
    torch.manual_seed(seed)
    ames = AMESLite(128)
    h_a = fit(ames, pairs, epochs=epochs, batch_size=32, lr=2e-3, seed=seed, progress=progress)
    t2 = time.perf_counter()
    return _World(
        splits, pairs, elvis, untrained, ames, h_e.loss, h_a.loss,
        {"ELViS": t1 - t0, "AMES-lite": t2 - t1},
    )  # fmt: skip


def _methods(w: _World) -> dict[str, tuple[Scorer | None, int]]:
    """name -> (scorer or None for global only, parameter count)."""
    return {
        "global VLAD": (None, 0),
        "MNN count": (lambda q, d: mnn_count(q, d, threshold=0.8), 0),
        "ratio + MAGSAC": (ratio_magsac_inliers, 0),
        "untrained OT + vote": (w.untrained.score, w.untrained.num_parameters()),
        "AMES-lite": (w.ames.score, w.ames.num_parameters()),
        "ELViS": (w.elvis.score, w.elvis.num_parameters()),
    }


def _evaluate(split: _Split, scorer: Scorer | None, lam: float = LAM) -> dict[str, float]:
    rel = split.data.relevant
    top_k = min(TOP_K, rel.shape[1])
    if scorer is None:
        order = np.argsort(-split.sims, axis=1, kind="stable")
        ms = 0.0
    else:
        t0 = time.perf_counter()
        _, order = rerank(split.sims, scorer, split.q, split.db, top_k=top_k, lam=lam, t=T)
        ms = 1e3 * (time.perf_counter() - t0) / (rel.shape[0] * top_k)
    out = {
        "mAP": 100 * mean_average_precision(order, rel),
        "mAP@10": 100 * map_at_k(order, rel, 10),
        "ms/pair": ms,
    }
    for protocol in REVISITED_PROTOCOLS:
        pos, junk = split.data.revisited(protocol)
        out[protocol[0].upper()] = 100 * revisited_map(order, pos, junk)
    return out


def _stereo_holds(model: ELViS, splits: dict[str, _Split]) -> tuple[bool, str]:
    left, right = stereo_pair()
    fl, fr = extract_sift(left, N_FEATURES), extract_sift(right, N_FEATURES)
    others = [f for s in splits.values() for f in s.db]
    s_pair = float(model.score([fl], [fr])[0])
    s_other = model.score([fl] * len(others), others)
    return s_pair > float(
        s_other.max()
    ), f"s(left,right)={s_pair:.1f} vs max other {s_other.max():.1f}"


def _figure(model: ELViS, split: _Split, n_show: int = 4):
    """A query, its re-ranked top results, and the correspondences that voted for the first."""
    rel = split.data.relevant
    scores, order = rerank(
        split.sims, model.score, split.q, split.db, top_k=min(TOP_K, rel.shape[1]), lam=LAM, t=T
    )
    glob = np.argsort(-split.sims, axis=1, kind="stable")
    # show the query whose AP re-ranking changed most (ties: the first)
    gain = [
        average_precision(rel[i][order[i]]) - average_precision(rel[i][glob[i]])
        for i in range(rel.shape[0])
    ]
    qi = int(np.argmax(gain))
    fig = plt.figure(figsize=(3.0 * (n_show + 2), 6.4))
    gs = fig.add_gridspec(2, n_show + 2)
    ax = fig.add_subplot(gs[0, 0])
    ax.imshow(split.data.queries[qi], cmap="gray", vmin=0, vmax=1)
    ax.set_title(f"query ({split.data.query_names[qi]})")
    ax.axis("off")
    for r in range(n_show):
        j = order[qi, r]
        ax = fig.add_subplot(gs[0, r + 1])
        ax.imshow(split.data.database[j], cmap="gray", vmin=0, vmax=1)
        ok = bool(rel[qi, j])
        ax.set_title(f"#{r + 1} {'✓ match' if ok else '✗ other'}  fused {scores[qi, r]:.2f}",
                     color="green" if ok else "red", fontsize=9)  # fmt: skip
        ax.axis("off")
    g_rank = int(glob[qi].tolist().index(order[qi, 0])) + 1
    fig.suptitle(
        f"ELViS re-ranking, out-of-domain query: AP {100 * average_precision(rel[qi][glob[qi]]):.0f}"
        f" (global VLAD) → {100 * average_precision(rel[qi][order[qi]]):.0f}; the new top-1 was "
        f"#{g_rank} by global VLAD"
    )
    # correspondences of the best result that voted (σ(f(r_i)) > 0.5)
    j = order[qi, 0]
    ex = model.explain(split.q[qi], split.db[j])
    qim, dim = split.data.queries[qi], split.data.database[j]
    h = max(qim.shape[0], dim.shape[0])
    canvas = np.ones((h, qim.shape[1] + dim.shape[1]), np.float32)
    canvas[: qim.shape[0], : qim.shape[1]] = qim
    canvas[: dim.shape[0], qim.shape[1] :] = dim
    ax = fig.add_subplot(gs[1, :])
    ax.imshow(canvas, cmap="gray", vmin=0, vmax=1)
    voted = np.nonzero(ex.row_votes > 0.5)[0]
    qxy, dxy = split.q[qi].xy, split.db[j].xy
    for i in voted:
        a, b = qxy[i], dxy[ex.row_match[i]]
        ax.plot([a[0], b[0] + qim.shape[1]], [a[1], b[1]], "-", lw=0.8, color="lime", alpha=0.8)
    ax.set_title(
        f"correspondences that voted for the top result: {len(voted)} of {len(ex.row_votes)} "
        f"query descriptors (vote > 0.5); s = {ex.score:.1f}"
    )
    ax.axis("off")
    fig.tight_layout()
    return fig


def _final_losses(w: _World) -> tuple[float, float]:
    """Mean training loss of ELViS and AMES-lite over the last eighth of their steps."""
    n_last = max(1, len(w.elvis_loss) // 8)
    return float(np.mean(w.elvis_loss[-n_last:])), float(np.mean(w.ames_loss[-n_last:]))


def _median_rows(per_seed: list[list[dict]]) -> list[dict]:
    rows = []
    for group in zip(*per_seed, strict=True):
        row = dict(group[0])
        for key, val in row.items():
            if isinstance(val, float):
                row[key] = float(np.median([g[key] for g in group]))
        rows.append(row)
    return rows


def _main_rows(w: _World, progress: bool) -> list[dict]:
    rows = []
    for name, (scorer, n_params) in progress_bar(
        _methods(w).items(), enabled=progress, desc="methods"
    ):
        res = {s: _evaluate(w.splits[s], scorer) for s in ("in-domain", "out-of-domain")}
        rows.append({
            "method": name,
            "in-domain mAP": res["in-domain"]["mAP"],
            "out-of-domain mAP": res["out-of-domain"]["mAP"],
            "gap (in − out)": res["in-domain"]["mAP"] - res["out-of-domain"]["mAP"],
            "ood mAP@10": res["out-of-domain"]["mAP@10"],
            "ms/pair": 0.5 * (res["in-domain"]["ms/pair"] + res["out-of-domain"]["ms/pair"]),
            "params": n_params,
            **{f"{tag} {p}": res[split][p] for split, tag in (("in-domain", "in"),
               ("out-of-domain", "ood")) for p in "EMH"},
        })  # fmt: skip
    return rows


MAIN_COLUMNS = ("method", "in-domain mAP", "out-of-domain mAP", "gap (in − out)", "ood mAP@10",
                "ms/pair", "params")  # fmt: skip
REVISITED_COLUMNS = ("method", "in E", "in M", "in H", "ood E", "ood M", "ood H")


def _kept_gain(row: dict, glob: dict) -> float:
    """Fraction of a re-ranker's in-domain mAP gain over global retrieval that it keeps out of domain."""
    gain_in = row["in-domain mAP"] - glob["in-domain mAP"]
    return (row["out-of-domain mAP"] - glob["out-of-domain mAP"]) / gain_in


def _main_checks(report: Report, rows: list[dict], loss_e: float, loss_a: float) -> None:
    by = {r["method"]: r for r in rows}
    e, a = by["ELViS"], by["AMES-lite"]
    for split in ("in-domain", "out-of-domain"):
        col = f"{split} mAP"
        for peer in ("global VLAD", "MNN count"):
            report.check(
                f"ELViS beats {peer} ({split})", e[col] > by[peer][col],
                f"{e[col]:.1f} vs {by[peer][col]:.1f}",
            )  # fmt: skip
    g = by["global VLAD"]
    # The comparison only means something if AMES-lite learned its training domain: its loss
    # left ln 2 and it re-ranks better than the global descriptor in domain.
    ames_learned = loss_a < math.log(2) - 0.05 and a["in-domain mAP"] > g["in-domain mAP"] + 1.0
    detail = (
        f"OOD mAP {e['out-of-domain mAP']:.1f} vs {a['out-of-domain mAP']:.1f}; in-domain gain "
        f"over global {e['in-domain mAP'] - g['in-domain mAP']:+.1f} vs "
        f"{a['in-domain mAP'] - g['in-domain mAP']:+.1f}"
    )
    name = (
        "ELViS holds up out of domain better than AMES-lite (higher OOD mAP and keeps a larger "
        "fraction of its in-domain gain over global VLAD)"
    )
    if ames_learned and e["in-domain mAP"] > g["in-domain mAP"]:
        keep_e, keep_a = _kept_gain(e, g), _kept_gain(a, g)
        report.check(
            name,
            e["out-of-domain mAP"] > a["out-of-domain mAP"] and keep_e >= keep_a,
            f"{detail}; fraction kept {keep_e:.2f} vs {keep_a:.2f}",
        )
    else:
        # not tested rather than faked: recorded as not holding, with the reason
        report.check(
            name,
            False,
            f"NOT MEANINGFUL: AMES-lite did not learn its training domain (final loss "
            f"{loss_a:.3f}, ln 2 = 0.693; in-domain mAP {a['in-domain mAP']:.1f} vs global "
            f"{g['in-domain mAP']:.1f}); for the record: {detail}",
        )
    report.check(
        "ELViS costs a fraction of AMES-lite (fewer parameters and less time per pair)",
        e["params"] < a["params"] and e["ms/pair"] < a["ms/pair"],
        f"{e['params']} vs {a['params']} params; {e['ms/pair']:.2f} vs {a['ms/pair']:.2f} ms/pair",
    )  # fmt: skip
    u = by["untrained OT + vote"]
    report.check(
        "training helps: ELViS ≥ untrained OT + vote on both splits",
        e["in-domain mAP"] >= u["in-domain mAP"] and e["out-of-domain mAP"] >= u["out-of-domain mAP"],
        f"in {e['in-domain mAP']:.1f} vs {u['in-domain mAP']:.1f}; "
        f"out {e['out-of-domain mAP']:.1f} vs {u['out-of-domain mAP']:.1f}",
    )  # fmt: skip
    report.note(
        "The out-of-domain comparison with AMES-lite asks for a higher out-of-domain mAP and at "
        "least as large a fraction of the in-domain gain over global VLAD kept out of domain, "
        "(ood − ood_global) / (in − in_global); a raw in − out gap would penalise a re-ranker "
        "for gaining in domain. It is only tested once AMES-lite has learned its training domain "
        "(final loss below ln 2 − 0.05 and in-domain mAP above global VLAD's + 1)."
    )
    report.check(
        "ELViS training does not collapse (final loss below ln 2)",
        loss_e < math.log(2) - 0.05,
        f"final-epoch loss {loss_e:.3f} (AMES-lite {loss_a:.3f}; ln 2 = 0.693)",
    )  # fmt: skip


def _table_and_metrics(report: Report, rows: list[dict]) -> None:
    report.add_table(
        "Re-ranking a global-VLAD shortlist (mAP %, λ = 0.5)", rows, columns=MAIN_COLUMNS
    )
    report.add_table(
        "Revisited-style mAP (%): easy (hard positives junk), medium (all), hard (easy positives "
        "junk); in-domain and out-of-domain",
        rows,
        columns=REVISITED_COLUMNS,
    )
    by = {r["method"]: r for r in rows}
    for name, key in (("ELViS", "elvis"), ("AMES-lite", "ames_lite"), ("global VLAD", "global")):
        report.metric(f"{key}_in_mAP", round(by[name]["in-domain mAP"], 1))
        report.metric(f"{key}_ood_mAP", round(by[name]["out-of-domain mAP"], 1))
        for p in "EMH":
            report.metric(f"{key}_ood_{p}", round(by[name][f"ood {p}"], 1))


def _threads() -> int:
    # small-op Sinkhorn kernels are faster on one thread on 2-core machines (CONVENTIONS)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    return previous


def reproduce(*, quick: bool = True, seed: int = 0, progress: bool = False) -> Report:
    """Train on photo, re-rank in- and out-of-domain shortlists with six methods.

    One seed with ``quick``, the median over seeds ``seed, seed+1, seed+2`` otherwise.
    """
    previous = _threads()
    try:
        seeds = [seed] if quick else [seed, seed + 1, seed + 2]
        report = Report(
            PACKAGE, "reproduce", CLAIM, seed=seed, backends=BACKENDS,
            config={"quick": quick, "seeds": seeds, "n_features": N_FEATURES, "top_k": TOP_K,
                    "temperature": TEMPERATURE, "lam": LAM, "t": T, "torch_threads": 1},
        )  # fmt: skip
        per_seed, losses, worlds = [], [], []
        for s in seeds:
            w = _build(quick, s, progress)
            per_seed.append(_main_rows(w, progress))
            losses.append(_final_losses(w))
            worlds.append(w)
        rows = _median_rows(per_seed)
        _table_and_metrics(report, rows)
        loss_e, loss_a = (float(np.median(x)) for x in zip(*losses, strict=True))
        _main_checks(report, rows, loss_e, loss_a)
        held, detail = _stereo_holds(worlds[0].elvis, worlds[0].splits)
        report.check(
            "real stereo pair: s(left, right) beats s(left, any database image)", held, detail
        )
        report.add_figure(
            "reranked_query", _figure(worlds[0].elvis, worlds[0].splits["out-of-domain"])
        )
        report.note(
            "Descriptors are RootSIFT (256 per image), not DINOv2 tokens; the benchmark is the "
            "bundled paste-in-clutter set, not the paper's datasets: only orderings are comparable."
        )
        report.note(
            f"Training pairs: {len(worlds[0].pairs)} (photo only). Fusion uses t = 1/median of "
            "the shortlist's local scores (label-free, per method) instead of t = 0.5, because "
            "inlier counts, vote counts and logits live on different scales."
        )
        return report
    finally:
        torch.set_num_threads(previous)


def _ablation_scorer(model: ELViS, variant: str) -> Scorer:
    def score(qs, ds):
        out = []
        with torch.no_grad():
            for start in range(0, len(qs), 64):
                qb, qm = pad_batch(qs[start : start + 64])
                db, dm = pad_batch(ds[start : start + 64])
                if variant == "no OT (vote on raw cosine maxima)":
                    sim = model.embed(qb) @ model.embed(db).transpose(1, 2)
                    sim = sim.masked_fill(qm[:, :, None] | dm[:, None, :], -2.0)
                    rv = model.vote(sim.amax(2)) * (~qm)
                    cv = model.vote(sim.amax(1)) * (~dm)
                    out.append((rv.sum(1) + cv.sum(1)).double().numpy())
                else:  # plain sum of best masses instead of the vote
                    xq, xd = model.embed(qb), model.embed(db)
                    plan = dustbin_transport(
                        xq @ xd.transpose(1, 2), model.gains(xq), model.gains(xd), model.corner,
                        temperature=model.temperature, n_iters=model.n_iters,
                        row_mask=qm, col_mask=dm, domain=model.domain,
                    )  # fmt: skip
                    rb, cb = plan.amax(2), plan.amax(1)
                    out.append(((rb * ~qm).sum(1) + (cb * ~dm).sum(1)).double().numpy())
        return np.concatenate(out)

    return score


def bench(*, quick: bool = True, seed: int = 0, progress: bool = False) -> Report:
    """Peers side by side, out-of-domain transforms, ablations and throughput.

    The main table is the median over seeds ``seed, seed+1, seed+2`` unless ``quick``.
    """
    previous = _threads()
    try:
        shifts = ("invert", "jpeg") if quick else ("invert", "sketch", "perspective", "jpeg")
        seeds = [seed] if quick else [seed, seed + 1, seed + 2]
        report = Report(
            PACKAGE, "bench", CLAIM, seed=seed, backends=BACKENDS,
            config={"quick": quick, "seeds": seeds, "n_features": N_FEATURES, "top_k": TOP_K, "shifts": shifts,
                    "temperature": TEMPERATURE, "lam": LAM, "t": T, "torch_threads": 1},
        )  # fmt: skip
        # main table: one seed with ``quick``, the median over three otherwise; the
        # transforms, ablations and throughput use the first seed's world
        per_seed, losses = [], []
        for k, s in enumerate(seeds):
            world = _build(quick, s, progress, shifts if k == 0 else ())
            per_seed.append(_main_rows(world, progress))
            losses.append(_final_losses(world))
            if k == 0:
                w = world
        rows = _median_rows(per_seed)
        _table_and_metrics(report, rows)
        loss_e, loss_a = (float(np.median(x)) for x in zip(*losses, strict=True))
        _main_checks(report, rows, loss_e, loss_a)

        # out-of-domain transforms
        methods = _methods(w)
        shift_rows = []
        for name in ("global VLAD", "ratio + MAGSAC", "AMES-lite", "ELViS"):
            row = {"method": name}
            for shift in shifts:
                row[f"ood+{shift} mAP"] = _evaluate(w.splits[f"ood+{shift}"], methods[name][0])[
                    "mAP"
                ]
            shift_rows.append(row)
        report.add_table("Extra out-of-domain transforms of the database (mAP %)", shift_rows)

        # ablations on the trained model, out of domain and in domain
        ood, ind = w.splits["out-of-domain"], w.splits["in-domain"]
        abl = []

        def add(label: str, scorer: Scorer, lam: float = LAM) -> None:
            abl.append({
                "variant": label,
                "in-domain mAP": _evaluate(ind, scorer, lam)["mAP"],
                "out-of-domain mAP": _evaluate(ood, scorer, lam)["mAP"],
            })  # fmt: skip

        add("ELViS (T=10, τ=10, λ=0.5)", w.elvis.score)
        no_gain = copy.deepcopy(w.elvis)
        with torch.no_grad():
            no_gain.gain_mlp[2].weight.zero_()
            no_gain.gain_mlp[2].bias.fill_(math.atanh(GAIN_INIT))
        add(f"no gains (constant dustbin {GAIN_INIT})", no_gain.score)
        add(
            "no OT (vote on raw cosine maxima)",
            _ablation_scorer(w.elvis, "no OT (vote on raw cosine maxima)"),
        )
        add("plain sum of best masses (no vote)", _ablation_scorer(w.elvis, "sum"))
        for n_iters in (0, 1, 3, 30) if not quick else (1, 30):
            m = copy.deepcopy(w.elvis)
            m.n_iters = n_iters
            add(f"Sinkhorn T={n_iters}", m.score)
        for tau in (20.0, 30.0, 50.0) if not quick else (30.0,):
            m = copy.deepcopy(w.elvis)
            m.log_temperature.fill_(math.log(tau))
            add(f"temperature τ={tau:g}", m.score)
        for lam in (0.0, 0.25, 0.75):
            add(f"fusion λ={lam}", w.elvis.score, lam)
        report.add_table("Ablations of the trained ELViS (mAP %)", abl)

        # throughput at 256 descriptors per image, 64 pairs per batch, one thread
        q = ood.q[:1] * 64
        d = (ood.db * 64)[:64]
        timings = {}
        for label, fn in (
            ("ELViS (log Sinkhorn)", lambda: w.elvis.score(q, d)),
            ("ELViS (exp Sinkhorn)", lambda: _exp(w.elvis).score(q, d)),
            ("ratio + MAGSAC", lambda: ratio_magsac_inliers(q, d)),
            ("AMES-lite", lambda: w.ames.score(q, d)),
        ):
            timings[label] = timeit(fn, repeats=3 if quick else 5, warmup=1).median
        best = min(timings["ELViS (log Sinkhorn)"], timings["ELViS (exp Sinkhorn)"])
        thr_rows = [
            {"method": k, "pairs/s": len(q) / v, "relative to best ELViS": best / v}
            for k, v in timings.items()
        ]
        report.add_table(
            "Throughput (256 RootSIFT per image, 64 pairs per batch, 1 thread)", thr_rows
        )
        by = {r["method"]: r for r in rows}
        pps = len(q) / best
        report.metric("elvis_pairs_per_s", round(pps, 1))
        report.check(
            "≥ 250 re-ranked pairs/s at 256 descriptors on one core",
            pps >= 250,
            f"{pps:.0f} pairs/s",
        )
        ratio = timings["ratio + MAGSAC"] / best
        better = by["ELViS"]["out-of-domain mAP"] > by["ratio + MAGSAC"]["out-of-domain mAP"]
        report.check(
            "≥ 3× the throughput of ratio + MAGSAC at a higher out-of-domain mAP",
            ratio >= 3 and better,
            f"{ratio:.1f}× ; OOD mAP {by['ELViS']['out-of-domain mAP']:.1f} vs "
            f"{by['ratio + MAGSAC']['out-of-domain mAP']:.1f}",
        )  # fmt: skip
        # analytic limit: Sinkhorn dominates, ~2·T·(m+1)(n+1) exp + adds per pair
        flops = 2 * 128 * N_FEATURES**2 + 10 * 2 * 3 * (N_FEATURES + 1) ** 2
        report.note(
            f"One ELViS pair is about {flops / 1e6:.1f} MFLOP (the 256×256×128 cosine matrix plus "
            f"10 Sinkhorn iterations of ~3 ops per cell); at {pps:.0f} pairs/s that is "
            f"{pps * flops / 1e9:.2f} GFLOP/s on one thread, well below the ~68 GFLOP/s matmul "
            "peak: the exp/log-sum-exp passes are memory bound."
        )
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        labels = [r["variant"] for r in abl]
        y = np.arange(len(abl))
        ax.barh(y - 0.2, [r["in-domain mAP"] for r in abl], 0.4, label="in-domain")
        ax.barh(y + 0.2, [r["out-of-domain mAP"] for r in abl], 0.4, label="out-of-domain")
        ax.set_yticks(y, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("mAP (%)")
        ax.set_title("ELViS ablations (bundled paste-in-clutter benchmark)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        report.add_figure("ablations", fig)
        return report
    finally:
        torch.set_num_threads(previous)


def _exp(model: ELViS) -> ELViS:
    m = copy.copy(model)
    m.domain = "exp"
    return m
