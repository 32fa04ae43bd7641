"""The objectives: every loss against float64 central finite differences and its
analytic limits; target masks from a mask video and from a background plate; frame
ranges, first contact, the restarts' spread."""

import numpy as np
import pytest
import torch

from gradsim_taichi import objectives as O


def _pair(seed=0, shape=(2, 5, 6)):
    g = torch.Generator().manual_seed(seed)
    pred = torch.rand(*shape, 4, generator=g, dtype=torch.float64)
    target = torch.rand(*shape, 4, generator=g, dtype=torch.float64)
    target[..., 3] = (target[..., 3] > 0.5).double()  # a binary target mask
    return pred, target


@pytest.mark.parametrize("name", [*O.LOSSES, "masked+silhouette"])
def test_every_loss_gradient_matches_central_differences(name):
    loss = O.masked_loss(0.3) if name == "masked+silhouette" else O.LOSSES[name]
    pred, target = _pair()
    # residuals both below and above the robust loss's scale
    pred[0, 0, :3, :3] = target[0, 0, :3, :3] + 1e-3
    pred.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: loss(p, target), (pred,), eps=1e-6,
                                    atol=1e-8, rtol=1e-6)


def test_robust_is_quadratic_below_its_scale_and_linear_above():
    eps = O.ROBUST_EPS
    zero = torch.zeros(1, dtype=torch.float64)
    small = torch.full((1,), 1e-6 * eps, dtype=torch.float64)
    large = torch.full((1,), 1e3 * eps, dtype=torch.float64)
    assert O.robust(small, zero).item() == pytest.approx(small.item() ** 2 / (2 * eps),
                                                         rel=1e-9)
    assert O.robust(large, zero).item() == pytest.approx(large.item() - eps, rel=1e-6)
    # no cancellation: a tiny residual still has a positive loss
    assert O.robust(torch.full((1,), 1e-12, dtype=torch.float64), zero).item() > 0


def test_robust_residuals_square_to_the_charbonnier_terms_and_are_smooth():
    """Levenberg-Marquardt's residuals of the robust loss: their squares are
    ``sqrt(r^2 + eps^2) - eps`` (written out here, at residuals where it does not
    cancel), odd, and their derivative matches central differences through 0."""
    eps = O.ROBUST_EPS
    r = torch.linspace(-0.5, 0.5, 101, dtype=torch.float64)
    rr = O.robust_residual(r)
    np.testing.assert_allclose((rr ** 2).numpy(), (torch.sqrt(r * r + eps * eps) - eps).numpy(),
                               rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(O.robust_residual(-r).numpy(), -rr.numpy(), rtol=0, atol=0)
    x = torch.tensor([-0.3, -1e-3, 0.0, 2e-4, 0.02], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(O.robust_residual, (x,), eps=1e-7, atol=1e-7, rtol=1e-6)
    assert O.lm_residual(O.robust) is O.robust_residual and O.lm_residual(O.silhouette) is None


def test_silhouette_is_zero_for_equal_masks_one_for_disjoint_and_ignores_colour():
    pred, target = _pair(1)
    same = target.clone()
    same[..., :3] = 1 - same[..., :3]  # other colours, same mask
    assert O.silhouette(same, target).item() == pytest.approx(0.0, abs=1e-9)
    apart = target.clone()
    apart[..., 3] = 1 - target[..., 3]
    assert O.silhouette(apart, target).item() == pytest.approx(1.0, abs=1e-6)
    # half of a frame's object covered: IoU 1/2
    m = torch.zeros(1, 4, 4, 4, dtype=torch.float64)
    m[0, :2, :, 3] = 1
    half = m.clone()
    half[0, 1, :, 3] = 0
    assert O.silhouette(half, m).item() == pytest.approx(0.5, abs=1e-6)


def test_masked_compares_colours_only_inside_the_mask():
    pred, target = _pair(2)
    pred[..., 3] = target[..., 3]  # outlines agree: only colours count
    outside = target[..., 3] == 0
    changed = pred.clone()
    changed[..., :3][outside] = 0.123  # colours outside the mask do not matter
    assert O.masked(changed, target).item() == pytest.approx(O.masked(pred, target).item(),
                                                             rel=1e-12)
    inside = target[..., 3:4]
    want = (((pred[..., :3] - target[..., :3]) ** 2) * inside).sum() / (3 * inside.sum())
    assert O.masked(pred, target).item() == pytest.approx(want.item(), rel=1e-9)
    # with a silhouette weight, the outline counts as well
    off = pred.clone()
    off[..., 3] = 1 - target[..., 3]
    plus = O.masked_loss(0.5)
    assert plus.needs_mask and plus.__name__ == "masked"
    assert plus(off, target).item() == pytest.approx(want.item() + 0.5, abs=1e-6)
    with pytest.raises(ValueError, match="silhouette weight"):
        O.masked_loss(-1)


def test_get_loss_names_the_choices():
    assert O.get_loss("robust") is O.robust
    with pytest.raises(ValueError, match="silhouette"):
        O.get_loss("l7")
    assert O.needs_mask(O.masked) and not O.needs_mask(O.mse)


# ---- masks ----------------------------------------------------------------------------
def test_mask_from_video_any_channel_above_half():
    video = torch.zeros(2, 3, 3, 3)
    video[0, 0, 0, 2] = 0.6
    video[1, 2, 2, 0] = 0.4
    m = O.mask_from_video(video)
    assert m.shape == (2, 3, 3) and m.sum() == 1 and m[0, 0, 0] == 1


def test_mask_from_plate_keys_and_cleans_up():
    plate = torch.full((8, 8, 3), 0.5, dtype=torch.float64)
    frames = plate[None].repeat(1, 1, 1, 1).clone()
    frames[0, 2:6, 2:6] = 0.9  # the object
    frames[0, 0, 7] = 0.9  # a speck
    frames[0, 1, 1] += 0.05  # below the threshold
    m = O.mask_from_plate(frames, plate)
    assert m[0, 2:6, 2:6].all() and m[0, 0, 7] == 1 and m.sum() == 17
    clean = O.mask_from_plate(frames, plate, cleanup=1)
    assert clean[0, 2:6, 2:6].all() and clean.sum() == 16
    with pytest.raises(ValueError, match="plate is 4x8 pixels; the target video is 8x8"):
        O.mask_from_plate(frames, plate[:, :4])


def test_mask_from_plate_can_leave_out_shadows():
    """A shadow darkens the plate by one factor in every channel; the object has its own
    hue. Keyed plainly both count; with shadows=True only the object does."""
    plate = torch.tensor([0.55, 0.6, 0.55], dtype=torch.float64).expand(6, 6, 3)
    frames = plate[None].clone()
    frames[0, 1:3, 1:3] = torch.tensor([0.7, 0.3, 0.2], dtype=torch.float64)  # object
    frames[0, 4:6, 1:5] *= 0.5  # its shadow
    assert O.mask_from_plate(frames, plate).sum() == 4 + 8
    m = O.mask_from_plate(frames, plate, shadows=True)
    assert m.sum() == 4 and m[0, 1:3, 1:3].all()


def test_erode_mask_keeps_pixels_whose_whole_neighbourhood_is_object():
    m = torch.zeros(1, 8, 8, dtype=torch.float64)
    m[0, 1:6, 2:7] = 1  # 5 x 5
    e = O.erode_mask(m, 1)
    assert e.sum() == 9 and e[0, 2:5, 3:6].all()
    assert O.erode_mask(m, 2).sum() == 1 and torch.equal(O.erode_mask(m, 0), m)
    with pytest.raises(ValueError, match="mask erosion"):
        O.erode_mask(m, -1)


def test_check_mask_names_the_mismatch():
    class S:
        name, frames, width, height = "s", 3, 8, 6
    with pytest.raises(ValueError, match="has 3 frames"):
        O.check_mask(S(), torch.zeros(3, 6, 8))
    with pytest.raises(ValueError, match="is 6x8 pixels"):
        O.check_mask(S(), torch.zeros(4, 8, 6))
    assert O.check_mask(S(), torch.ones(4, 6, 8)).shape == (4, 6, 8)


# ---- frames, contact, spread ----------------------------------------------------------
def test_frame_range_limits_every_stage():
    st = O.Stages(20, warmup=[(2, 3), (2, 12)], frame_range=(5, 15), frame_stride=2)
    assert st.all_ids.tolist() == [5, 7, 9, 11, 13, 15]
    assert st.horizons == [(2, 12)]  # (2, 3) selects no frame of the range: dropped
    assert st.frame_ids(0).tolist() == [5, 7, 9, 11] and st.frame_ids(2)[-1] == 15
    for bad in [(5, 5), (3, 21), (-1, 4), "1:2"]:
        with pytest.raises(ValueError, match="frame range"):
            O.Stages(20, frame_range=bad)


def test_a_converged_stage_ends_early_and_later_boundaries_follow():
    st = O.Stages(30, warmup=[(4, 5), (4, 10), (4, 20)], coarse_iters=10)
    assert st.ends == [4, 8, 12] and not st.final(11) and st.final(12)
    assert st.end_objective_after(1) == (4, 2)  # stage 0 converged at iteration 1
    assert st.ends == [2, 6, 10] and st.coarse_end == 8 and st.coarse_iters == 10
    assert st.starts_new_objective(2) and st.frame_ids(2)[-1] == 10
    assert st.end_objective_after(2) == (6, 3)  # ... stage 1 at once
    assert st.ends == [2, 3, 7] and st.coarse_end == 5
    assert st.coarse(4) and not st.coarse(5) and st.starts_new_objective(5)
    assert st.end_objective_after(5) == (7, 1) and st.ends == [2, 3, 6]
    assert st.end_objective_after(6) == (7, 0) and st.ends == [2, 3, 6]  # final: stays
    assert st.final(6) and st.frame_ids(6)[-1] == 30


def test_first_contact():
    y = torch.tensor([1.0, 0.6, 0.3, 0.05, 0.0], dtype=torch.float64)
    pos = torch.zeros(5, 2, 3, dtype=torch.float64)
    pos[:, 0, 1] = y
    pos[:, 1, 1] = y + 0.2
    pos[:, 1, 0] = 1.0  # extent at frame 0: sqrt(1 + 0.04)
    assert O.first_contact(pos, 0.0) == 4  # tol ~0.0102 < 0.05
    assert O.first_contact(pos, 0.0, tol=0.1) == 3
    assert O.first_contact(pos, -1.0) is None


def test_relative_spread():
    assert O.relative_spread([4.0, 4.0, 4.0]) == 0.0
    assert O.relative_spread([4.0, 4.4]) == pytest.approx(0.4 / 4.2)
    assert O.relative_spread([np.array([1.0, 2.0]), np.array([1.0, 2.3])]) == \
        pytest.approx(0.3 / 1.575)


# ---- on a rendered clip ---------------------------------------------------------------
def test_mask_from_a_background_plate_is_the_true_coverage_within_a_pixel():
    """Render the rigid-mass clip with and without the body: keying against the empty
    stage gives the body's coverage (more than half a pixel covered), except at pixels
    within one pixel of its outline."""
    from gradsim_taichi.estimation import render_target, render_target_mask
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", frames=6, width=32, height=32)
    scene.build()
    frames = render_target(scene)[..., :3]
    plate = scene.render_backdrop()[..., :3]
    assert plate.shape == (32, 32, 3)
    truth = render_target_mask(scene)
    keyed = O.mask_from_plate(frames, plate)
    assert truth.sum() > 7 * 40  # the body is in view in every frame

    def pool(m):
        return torch.nn.functional.max_pool2d(m[:, None], 3, 1, 1)[:, 0]

    edge = pool(truth) - (1 - pool(1 - truth))  # within one pixel of the outline
    wrong = keyed != truth
    assert wrong.any() == (wrong & (edge > 0)).any()  # every disagreement at an edge
    assert (wrong & (edge == 0)).sum() == 0
    assert wrong.sum() < 0.5 * (edge > 0).sum()  # not the whole edge band


def test_object_coverage_excludes_the_stage():
    from gradsim_taichi.estimation import render_target
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", frames=2, width=16, height=16)
    scene.build()
    full = render_target(scene)
    with torch.no_grad():
        cov = scene.render(scene.simulate(scene.true_values(scene.params)), coverage=True)
    assert torch.equal(cov[..., :3], full[..., :3])
    assert (full[..., 3] > 0.99).double().mean() > 0.9  # the stage covers the image
    assert cov[..., 3].min() < 1e-6 and cov[..., 3].max() > 0.99


def _ycbcr(rgb):
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return torch.stack([0.299 * r + 0.587 * g + 0.114 * b,
                        -0.168736 * r - 0.331264 * g + 0.5 * b,
                        0.5 * r - 0.418688 * g - 0.081312 * b], -1)


def test_chroma_420_keeps_luma_per_pixel_and_colour_per_block():
    gen = torch.Generator().manual_seed(0)
    rgb = torch.rand(2, 5, 7, 3, generator=gen, dtype=torch.float64)
    mask = torch.rand(2, 5, 7, 1, generator=gen, dtype=torch.float64)
    out = O.chroma_420(torch.cat([rgb, mask], -1))
    assert out.shape == (2, 5, 7, 4)
    ycc = _ycbcr(rgb)
    torch.testing.assert_close(out[..., 0], ycc[..., 0], rtol=0, atol=1e-15)
    assert torch.equal(out[..., 3], mask[..., 0])
    # pixel (2, 3) lies in the block of rows 2-3 and columns 2-3; the odd last row (4)
    # and column (6) are blocks of their own, padded by repeating themselves
    torch.testing.assert_close(out[:, 2, 3, 1:3], ycc[:, 2:4, 2:4, 1:].mean((1, 2)))
    torch.testing.assert_close(out[:, 4, 6, 1:3], ycc[:, 4, 6, 1:])
    torch.testing.assert_close(out[:, 4, 1, 1:3], ycc[:, 4, 0:2, 1:].mean(1))
    # linear: its gradient is exact
    x = rgb[:1, :3, :3].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(O.chroma_420, (x,))


def test_chroma_420_sees_an_h264_clip_as_its_source(tmp_path):
    """Colour blocks with edges inside the codec's 2 x 2 chroma blocks, through our own
    H.264 writer and reader: compared as 4:2:0, the decoded clip is far closer to its
    source than compared per pixel (the codec kept colour per block)."""
    from gradsim_taichi.render import load_video, save_video

    gen = torch.Generator().manual_seed(1)
    cells = torch.rand(4, 9, 9, 3, generator=gen, dtype=torch.float64)
    src = cells.repeat_interleave(3, 1).repeat_interleave(3, 2)[:, :24, :24]  # 3 px cells
    src = (src * 255).round() / 255
    save_video(src, tmp_path / "clip.mp4", fps=30)
    clip = load_video(tmp_path / "clip.mp4").to(torch.float64)
    per_pixel = float(((_ycbcr(clip) - _ycbcr(src)) ** 2).mean())
    as_codec = float(((O.chroma_420(clip) - O.chroma_420(src)) ** 2).mean())
    assert as_codec < 0.3 * per_pixel, (as_codec, per_pixel)


def test_chroma_for_a_target():
    from gradsim_taichi.estimation_outputs import chroma_for

    assert chroma_for("clip.MP4") == "420" and chroma_for("a/b.mov") == "420"
    assert chroma_for("frames/") == "full" and chroma_for("clip.gif") == "full"
    assert chroma_for(None) == "full" and chroma_for("clip.mp4", "full") == "full"
    with pytest.raises(ValueError, match="chroma must be one of full, 420"):
        O.check_chroma("444")


def test_iterations_for_a_foreign_target():
    from gradsim_taichi.estimation_outputs import (
        APPEARANCE_MIN_ITERS,
        LEARNED_VIEW_MIN_ITERS,
        OWN_VIDEO_FIT,
        OWN_VIDEO_MIN_ITERS,
        iters_for,
    )

    assert iters_for(False, 12) == 12 and iters_for(False, 12, 5) == 5
    assert iters_for(True, 12) == OWN_VIDEO_MIN_ITERS and iters_for(True, 12, 7) == 7
    assert iters_for(True, OWN_VIDEO_MIN_ITERS + 50) == OWN_VIDEO_MIN_ITERS + 50
    # learning the camera or the light takes longer to converge
    assert iters_for(True, 12, fit="background,shadow") == OWN_VIDEO_MIN_ITERS
    # (the default fit for a video the engine did not make learns the lights and the
    # camera's blur and response)
    assert iters_for(True, 12, fit=OWN_VIDEO_FIT) == APPEARANCE_MIN_ITERS
    assert iters_for(True, 12, fit="background,blur") == LEARNED_VIEW_MIN_ITERS
    assert iters_for(True, 12, fit="shadow,appearance") == APPEARANCE_MIN_ITERS
    assert APPEARANCE_MIN_ITERS > LEARNED_VIEW_MIN_ITERS
    assert iters_for(True, 12, fit=("camera",)) == LEARNED_VIEW_MIN_ITERS > OWN_VIDEO_MIN_ITERS
    assert iters_for(False, 12, fit="camera") == 12 and iters_for(True, 12, 7, "camera") == 7
