"""Digits-T2I: tokenisation, the classifier reward, prompts never masked, the image branch of the
MaskGRPO estimator (random remasking at the t_μ schedule), and a trainer step with the emerge
sampler and classifier-free guidance."""

import math

import numpy as np
import pytest
import torch

from iclr26.maskgrpo import (
    DigitsT2I,
    MaskGRPOConfig,
    MaskGRPOTrainer,
    TinyMaskedDenoiser,
    build_estimator_inputs,
    emerge_sample,
    get_task,
    mask_ratio_schedule,
    maskgit_sample,
)

TASK = DigitsT2I()  # 8×8, 5 grey levels


def _tiny(task=TASK, seed=0):
    torch.manual_seed(seed)
    return TinyMaskedDenoiser(
        task.vocab_size, task.prompt_len + task.completion_len, d_model=16, n_layers=1,
        n_heads=2, mask_id=task.mask_id,
    )  # fmt: skip


def test_vocabulary_layout():
    assert (TASK.vocab_size, TASK.mask_id, TASK.null_id) == (17, 16, 15)
    assert TASK.class_token(0) == 5
    assert TASK.class_token(9) == 14
    assert (TASK.prompt_len, TASK.completion_len) == (1, 64)
    assert DigitsT2I(size=4).completion_len == 16
    assert get_task("digits") == TASK


@pytest.mark.parametrize("levels", [5, 17])
def test_tokenisation_round_trip(levels):
    task = DigitsT2I(levels=levels)
    tokens = torch.randint(0, levels, (20, 64), generator=torch.Generator().manual_seed(0))
    assert torch.equal(task.encode_images(task.decode_tokens(tokens)), tokens)
    # with 17 levels the dataset's integer grey values 0..16 are tokens themselves
    from sklearn.datasets import load_digits

    images = load_digits().images[:50]
    if levels == 17:
        np.testing.assert_array_equal(
            task.decode_tokens(task.encode_images(images)).numpy(), images
        )
    else:  # nearest of 5 levels: error at most half a level (2 grey units)
        err = np.abs(task.decode_tokens(task.encode_images(images)).numpy() - images)
        assert err.max() <= 2.0 + 1e-12


def test_pairs_are_dataset_images_with_their_class():
    from sklearn.datasets import load_digits

    data = load_digits()
    prompts, comps = DigitsT2I(p_uncond=0.0).sample_pairs(64, seed=3)
    enc = TASK.encode_images(data.images)
    for c, img in zip(prompts[:, 0].tolist(), comps, strict=True):
        rows = (enc == img).all(1).nonzero().flatten()
        assert len(rows) > 0
        assert (data.target[rows.numpy()] == c - TASK.levels).any()
    p2, _ = DigitsT2I(p_uncond=0.5).sample_pairs(400, seed=3)
    frac_null = float((p2[:, 0] == TASK.null_id).double().mean())
    assert abs(frac_null - 0.5) < 3 * math.sqrt(0.25 / 400)


def test_reward_is_the_classifier_probability_of_the_prompted_class():
    prompts, comps = DigitsT2I(p_uncond=0.0).sample_pairs(200, seed=1)
    r = TASK.reward(prompts, comps)
    assert r.dtype == torch.float32
    assert r.shape == (200,)
    assert float(r.mean()) > 0.8  # real digits are recognised
    assert float(TASK.score(prompts, comps).mean()) > 0.9
    # the ten class prompts of one image give its class distribution (sums to 1)
    img = comps[:1].repeat(10, 1)
    all_classes = torch.arange(TASK.levels, TASK.levels + 10)[:, None]
    per_class = TASK.reward(all_classes, img).double()
    assert abs(float(per_class.sum()) - 1.0) < 1e-5
    assert int(per_class.argmax()) == int(TASK.class_probs(comps[:1]).argmax())
    # a wrong class gets little reward; noise images get about chance
    wrong = TASK.levels + (prompts - TASK.levels + 1) % 10
    assert float(TASK.reward(wrong, comps).mean()) < 0.1
    noise = torch.randint(0, TASK.levels, (200, 64), generator=torch.Generator().manual_seed(0))
    assert float(TASK.reward(prompts, noise).mean()) < 0.3
    # an image holding a class or null token is invalid: reward and score 0
    bad = comps[:4].clone()
    bad[:, 10] = TASK.null_id
    assert TASK.reward(prompts[:4], bad).eq(0).all()
    assert TASK.score(prompts[:4], bad).eq(0).all()


@pytest.mark.parametrize("sampler", [emerge_sample, maskgit_sample])
@pytest.mark.parametrize("cfg_scale", [0.0, 3.0])
def test_samplers_never_touch_the_prompt(sampler, cfg_scale):
    policy = _tiny().eval()
    prompts = TASK.sample_prompts(12, seed=0)
    out = sampler(
        policy, prompts, TASK.completion_len, TASK.mask_id, steps=6, cfg_scale=cfg_scale,
        uncond_ids=TASK.uncond_ids if cfg_scale else None, generator=0,
    )  # fmt: skip
    assert torch.equal(out[:, :1], prompts)
    assert not (out == TASK.mask_id).any()
    assert float(TASK.reward(out[:, :1], out[:, 1:]).min()) >= 0.0


def test_image_branch_estimator_is_random_remasking_at_the_schedule():
    """remask="random": each image token masked i.i.d. w.p. t_μ (no position trend, unlike the
    AR-like text branch), the class token never, the same mask in every pass of an iteration."""
    seqs = torch.cat([TASK.sample_prompts(2000, 0), torch.randint(0, TASK.levels, (2000, 64))], 1)
    cfg = MaskGRPOConfig(estimator="maskgrpo", remask="random", num_iterations=4, seed=5)
    for mu in range(4):
        t = mask_ratio_schedule(mu, 4, 0.6)
        noised, mask = build_estimator_inputs(seqs, 1, TASK.mask_id, cfg, step=2, iteration=mu)
        assert torch.equal(noised[:, :1], seqs[:, :1])  # prompt never masked
        assert torch.equal(noised[:, 1:] == TASK.mask_id, mask)
        n = mask.numel()
        assert abs(float(mask.double().mean()) - t) < 4 * math.sqrt(t * (1 - t) / n)
        if t < 0.99:  # flat across positions: first vs last 16 pixels
            half = mask.shape[0] * 16
            first, last = mask[:, :16].double().mean(), mask[:, -16:].double().mean()
            assert abs(float(first - last)) < 4 * math.sqrt(2 * t * (1 - t) / half)
        again, mask2 = build_estimator_inputs(
            seqs, 1, TASK.mask_id, cfg, step=2, iteration=mu, pass_index=1
        )
        assert torch.equal(again, noised)
        assert torch.equal(mask2, mask)
    ar = MaskGRPOConfig(estimator="maskgrpo", remask="ar_like", num_iterations=4, seed=5)
    _, m_ar = build_estimator_inputs(seqs, 1, TASK.mask_id, ar, step=2, iteration=0)
    assert float(m_ar[:, -16:].double().mean() - m_ar[:, :16].double().mean()) > 0.3


def test_trainer_step_on_digits_with_emerge_and_guidance():
    cfg = MaskGRPOConfig(
        num_generations=4, num_iterations=2, remask="random", sampler="emerge",
        sampling_steps=4, temperature=1.0, cfg_scale=3.0, seed=0,
    )  # fmt: skip
    tr = MaskGRPOTrainer(_tiny(), TASK, cfg)
    before = [q.detach().clone() for q in tr.policy.parameters()]
    rec = tr.step(TASK.sample_prompts(2, 0))
    assert 0.0 <= rec["reward"] <= 1.0
    assert math.isfinite(rec["loss"])
    assert any(not torch.equal(a, b) for a, b in zip(before, tr.policy.parameters(), strict=True))
    seqs = tr.rollout(TASK.sample_prompts(2, 0))
    assert torch.equal(seqs[::4, :1], TASK.sample_prompts(2, 0))


def test_guidance_needs_a_null_prompt():
    from iclr26.maskgrpo import Sort8

    with pytest.raises(ValueError, match="uncond_ids"):
        MaskGRPOTrainer(
            TinyMaskedDenoiser(13, 17, d_model=8, n_layers=1, n_heads=2), Sort8(),
            MaskGRPOConfig(sampler="emerge", cfg_scale=1.0),
        )  # fmt: skip
    with pytest.raises(ValueError, match="cfg_scale"):
        MaskGRPOConfig(cfg_scale=1.0)  # the low-confidence sampler has no guidance


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: DigitsT2I(size=6), ValueError, "size"),
        (lambda: DigitsT2I(levels=1), ValueError, "levels"),
        (lambda: DigitsT2I(p_uncond=1.0), ValueError, "p_uncond"),
        (lambda: TASK.encode_images(np.zeros((2, 4, 4))), ValueError, "images"),
        (lambda: TASK.encode_images(np.full((1, 8, 8), 17.0)), ValueError, "images"),
        (lambda: TASK.encode_images(np.full((1, 8, 8), np.nan)), ValueError, "images"),
        (lambda: TASK.decode_tokens(torch.zeros(2, 64)), TypeError, "completions"),
        (lambda: TASK.decode_tokens(torch.full((2, 64), 5)), ValueError, "completions"),
        (lambda: TASK.reward(torch.zeros(2, 1).long(), torch.zeros(2, 64).long()), ValueError,
         "prompts"),
        (lambda: TASK.reward(TASK.sample_prompts(2, 0), torch.zeros(3, 64).long()), ValueError,
         "completions"),
        (lambda: TASK.reward(TASK.sample_prompts(2, 0), torch.full((2, 64), 16)), ValueError,
         "completions"),
        (lambda: TASK.sample_prompts(0, 0), ValueError, "n"),
        (lambda: TASK.sample_pairs(2, -1), ValueError, "seed"),
        (lambda: TASK.class_token(10), ValueError, "label"),
    ],
)  # fmt: skip
def test_digits_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_cli_pretrains_and_trains_digits(tmp_path, capsys):
    from iclr26.maskgrpo.cli import main

    w, ck = tmp_path / "d.safetensors", tmp_path / "ck.pt"
    argv = ["pretrain-toy", "--task", "digits4", "--steps", "2", "--batch-size", "8", "--out",
            str(w), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    argv = ["train", "--task", "digits4", "--init", str(w), "--remask", "random", "--sampler",
            "emerge", "--cfg-scale", "3", "--prompts", "2", "--generations", "2", "--iterations",
            "2", "--steps", "1", "--eval-every", "0", "--checkpoint", str(ck), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    assert "checkpoint at step 1" in capsys.readouterr().out


def test_e1_run_on_digits_uses_the_image_branch():
    """The reproduce E1 run on Digits-T2I: random remask, emerge rollouts, a reward curve."""
    from iclr26.maskgrpo.experiments import ARMS, e1_run

    out = e1_run(
        "digits4", ARMS["MaskGRPO"], seed=0, steps=2, prompts_per_step=2, num_generations=4,
        num_iterations=2, eval_every=1, n_eval=4, keep_policy=True,
    )  # fmt: skip
    assert [c[0] for c in out["curve"]] == [0, 1, 2]
    assert all(0.0 <= c[2] <= 1.0 for c in out["curve"])
    assert out["zero_std_frac"] == 0.0  # continuous rewards: groups are never constant here
    assert isinstance(out["policy"], TinyMaskedDenoiser)
