"""Base-session training and the FSCIL methods: SAFA, its ablations and the baselines.

Every method receives a deep copy of one base-trained model (:func:`train_base`) so the
comparison is paired. SAFA's incremental session (§2.5): the backbone is frozen, thresholds are
regulated on the support set (§2.2, phase ``adapt``), new prototypes are the support class means,
projected toward the span of the base prototypes, and classification is 16 × cosine averaged over
time steps. Nothing is trained by backprop after the base session (except by :class:`FineTuneSNN`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from iclr26.safa_snn.losses import tet_loss
from iclr26.safa_snn.neurons import SparsityAwareLIF, set_phase
from iclr26.safa_snn.prototypes import (
    CosineClassifier,
    class_means,
    subspace_project,
    teen_calibrate,
)

__all__ = ["SAFA", "TEENSNN", "FineTuneSNN", "PrototypeSNN", "train_base"]


def _check_xy(x: Tensor, y: Tensor) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point torch.Tensor")
    if not isinstance(y, Tensor) or y.is_floating_point() or y.ndim != 1:
        raise TypeError("y must be a 1-D integer torch.Tensor")
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(
            f"x and y must have the same non-zero length, got {x.shape[0]} and {y.shape[0]}"
        )
    if not torch.isfinite(x).all():
        raise ValueError("x contains NaN or inf")


def train_base(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    classes: tuple[int, ...],
    *,
    epochs: int = 40,
    lr: float = 1e-3,
    weight_decay: float = 5e-4,
    batch_size: int = 64,
    tet_lambda: float = 0.05,
    tet_phi: float = 5.0,
    seed: int = 0,
    progress: bool = False,
) -> nn.Module:
    """Base-session training (§2.4): TET loss on per-step logits of the linear head, Adam with
    cosine decay to 1e-6, thresholds trained through the spike surrogate (phase ``base``).
    Labels are mapped to head rows in ``classes`` order. Returns ``model`` (trained in place)."""
    from iclr26.shared import progress as progress_bar

    _check_xy(x, y)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive int, got {epochs!r}")
    lut = {int(c): i for i, c in enumerate(classes)}
    if set(torch.unique(y).tolist()) - set(lut):
        raise ValueError("y has labels outside classes")
    if model.head.out_features != len(classes):
        model.head = nn.Linear(model.head.in_features, len(classes), bias=False)
    target = torch.tensor([lut[int(v)] for v in y.tolist()], dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model.set_generator(gen)
    set_phase(model, "base")
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(len(x) / batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs * steps_per_epoch, eta_min=1e-6)
    model.train()
    for _ in progress_bar(range(epochs), desc="base training", enabled=progress):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), batch_size):
            idx = perm[i : i + batch_size]
            if len(idx) < 2:  # BatchNorm needs two samples
                continue
            loss = tet_loss(model(x[idx]), target[idx], tet_lambda, tet_phi)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    model.eval()
    set_phase(model, "frozen")
    return model


@torch.no_grad()
def _features(model: nn.Module, x: Tensor, batch_size: int = 512) -> Tensor:
    return torch.cat([model.features(x[i : i + batch_size]) for i in range(0, len(x), batch_size)])


class PrototypeSNN:
    """Frozen backbone, class-mean prototypes, 16 × cosine; no regulation, no projection."""

    name = "prototype"

    def __init__(self, temperature: float = 16.0) -> None:
        self.temperature = temperature

    def _configure(self, model: nn.Module) -> None:
        for m in model.modules():
            if isinstance(m, SparsityAwareLIF):
                m.regulate = False

    def setup(self, model: nn.Module, x: Tensor, y: Tensor, classes: tuple[int, ...]) -> None:
        _check_xy(x, y)
        self.model = model.eval()
        self._configure(model)
        set_phase(model, "record")
        for m in model.modules():
            if isinstance(m, SparsityAwareLIF):
                m.reset_base_rate()
        feats = _features(model, x).mean(dim=1)  # records r̄_b over the base training set
        set_phase(model, "frozen")
        self.base_protos = class_means(feats, y, classes)
        self.classes = list(classes)
        self.head = CosineClassifier(feats.shape[1], self.temperature)
        self.head.add_classes(self.base_protos)

    def _calibrate(self, protos: Tensor) -> Tensor:
        return protos

    def config(self) -> dict:
        """The method's class and scalar hyper-parameters (the checkpoint fingerprint)."""
        cfg = {
            k: v
            for k, v in sorted(vars(self).items())
            if isinstance(v, bool | int | float | str) and not k.startswith("_")
        }
        return {"class": type(self).__name__, **cfg}

    def state_tensors(self) -> dict[str, Tensor]:
        """Everything :meth:`learn` changes: backbone state (θ, base rates, weights), prototype
        rows, base prototypes and the class list, as named tensors (for a checkpoint)."""
        out = {f"model.{k}": v for k, v in self.model.state_dict().items()}
        out["head.weight"] = self.head.weight.detach()
        out["base_protos"] = self.base_protos.detach()
        out["classes"] = torch.tensor(self.classes, dtype=torch.int64)
        return out

    def load_state_tensors(self, tensors: dict[str, Tensor]) -> None:
        """Restore the state saved by :meth:`state_tensors` (after :meth:`setup`)."""
        need = {"head.weight", "base_protos", "classes"}
        if not need <= set(tensors):
            raise ValueError(f"checkpoint lacks tensors {sorted(need - set(tensors))}")
        model_state = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
        try:
            self.model.load_state_dict(model_state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"checkpoint does not fit the model: {err}") from None
        w = tensors["head.weight"].to(self.head.weight)
        if w.shape[1] != self.head.feat_dim:
            raise ValueError("checkpoint prototypes do not match the feature size")
        self.head.weight = nn.Parameter(w.clone())
        self.base_protos = tensors["base_protos"].to(self.base_protos).clone()
        self.classes = [int(c) for c in tensors["classes"].tolist()]

    def _adapt(self, x: Tensor) -> float:
        return 0.0

    def learn(self, x: Tensor, y: Tensor, classes: tuple[int, ...]) -> dict[str, float]:
        _check_xy(x, y)
        forwards = self._adapt(x)
        feats = _features(self.model, x).mean(dim=1)
        protos = self._calibrate(class_means(feats, y, classes))
        self.head.add_classes(protos)
        self.classes += list(classes)
        return {"forwards": forwards + len(x), "backwards": 0.0}

    @torch.no_grad()
    def predict(self, x: Tensor) -> Tensor:
        logits = torch.cat(
            [self.head(self.model.features(x[i : i + 512])) for i in range(0, len(x), 512)]
        )
        return torch.tensor(self.classes)[logits.argmax(dim=1)]


class SAFA(PrototypeSNN):
    """SAFA-SNN's incremental sessions: threshold regulation + prototype subspace projection.

    Args:
        alpha: projection weight α (official ``shift_weight``; 0.1 for CIFAR-100).
        beta, gamma: threshold step sizes of unmasked / masked channels (0.1 / 0.01).
        regulate: run the threshold regulation (False = the released code's effective behaviour).
        homeostatic: flip the published sign of the threshold update.
        project: apply the subspace projection (False = the "no projection" ablation).
        adapt_steps: regulation forwards over the support set per session.
    """

    def __init__(
        self,
        alpha: float = 0.1,
        *,
        beta: float = 0.1,
        gamma: float = 0.01,
        regulate: bool = True,
        homeostatic: bool = False,
        project: bool = True,
        adapt_steps: int = 1,
        temperature: float = 16.0,
        name: str = "SAFA",
    ) -> None:
        super().__init__(temperature)
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if isinstance(adapt_steps, bool) or not isinstance(adapt_steps, int) or adapt_steps < 0:
            raise ValueError(f"adapt_steps must be an int >= 0, got {adapt_steps!r}")
        self.alpha, self.beta, self.gamma = alpha, beta, gamma
        self.regulate, self.homeostatic, self.project = regulate, homeostatic, project
        self.adapt_steps = adapt_steps
        self.name = name

    def _configure(self, model: nn.Module) -> None:
        for m in model.modules():
            if isinstance(m, SparsityAwareLIF):
                m.regulate, m.homeostatic = self.regulate, self.homeostatic
                m.beta, m.gamma = self.beta, self.gamma

    def _adapt(self, x: Tensor) -> float:
        if not self.regulate or self.adapt_steps == 0:
            return 0.0
        set_phase(self.model, "adapt")
        try:
            for _ in range(self.adapt_steps):
                _features(self.model, x, batch_size=len(x))
        finally:
            set_phase(self.model, "frozen")
        return float(self.adapt_steps * len(x))

    def _calibrate(self, protos: Tensor) -> Tensor:
        return subspace_project(protos, self.base_protos, self.alpha) if self.project else protos


class TEENSNN(PrototypeSNN):
    """TEEN-style training-free calibration of novel prototypes with base prototypes."""

    name = "TEEN"

    def __init__(self, tau: float = 16.0, weight: float = 0.5, temperature: float = 16.0) -> None:
        super().__init__(temperature)
        self.tau, self.weight = tau, weight

    def _calibrate(self, protos: Tensor) -> Tensor:
        return teen_calibrate(protos, self.base_protos, self.tau, self.weight)


class FineTuneSNN(PrototypeSNN):
    """The forgetting reference: new prototypes appended, then the whole network (backbone,
    thresholds and all prototype rows) fine-tuned with cross-entropy on the support set only."""

    name = "fine-tune"

    def __init__(
        self, epochs: int = 20, lr: float = 1e-3, seed: int = 0, temperature: float = 16.0
    ):
        super().__init__(temperature)
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"epochs must be a positive int, got {epochs!r}")
        self.epochs, self.lr, self.seed = epochs, lr, seed

    def learn(self, x: Tensor, y: Tensor, classes: tuple[int, ...]) -> dict[str, float]:
        cost = super().learn(x, y, classes)
        lut = {c: i for i, c in enumerate(self.classes)}
        target = torch.tensor([lut[int(v)] for v in y.tolist()], dtype=torch.long)
        self.model.set_generator(torch.Generator().manual_seed(self.seed + len(self.classes)))
        set_phase(self.model, "base")
        params = list(self.model.parameters()) + list(self.head.parameters())
        opt = torch.optim.Adam(params, lr=self.lr)
        self.model.train()
        for _ in range(self.epochs):
            loss = F.cross_entropy(self.head(self.model.features(x)), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        self.model.eval()
        set_phase(self.model, "frozen")
        return {
            "forwards": cost["forwards"] + self.epochs * len(x),
            "backwards": float(self.epochs * len(x)),
        }
