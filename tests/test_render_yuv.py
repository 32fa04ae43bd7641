"""An MP4's frames from its Y, Cb, Cr planes (render/yuv.py), and the chroma an encoder
stores (objectives.chroma_420(encoded=True)), against ffmpeg itself."""

import numpy as np
import pytest
import torch

from gradsim_taichi import objectives as O
from gradsim_taichi.render import load_video, save_video
from gradsim_taichi.render.yuv import stream_format, to_rgb

# the 8-bit studio range's steps: luma 1/219, chroma 1/224 of the signal
LUMA_STEP, CHROMA_STEP = 1 / 219, 1 / 224


def _ycbcr(rgb: np.ndarray, kr: float, kb: float) -> np.ndarray:
    """Y in [0, 1], Cb and Cr in [-1/2, 1/2] of RGB with the luma weights Kr, Kb."""
    y = kr * rgb[..., 0] + (1 - kr - kb) * rgb[..., 1] + kb * rgb[..., 2]
    return np.stack([y, (rgb[..., 2] - y) / (2 * (1 - kb)), (rgb[..., 0] - y) / (2 * (1 - kr))],
                    -1)


@pytest.mark.parametrize("full, matrix", [(False, (0.299, 0.114)), (True, (0.2126, 0.0722))])
def test_to_rgb_inverts_the_conversion_to_planes(full, matrix):
    """Planes made from RGB frames whose colour is constant over 2 x 2 blocks (so that the
    4:2:0 planes hold all of it), unquantised: to_rgb gives the frames back."""
    rng = np.random.default_rng(0)
    rgb = rng.uniform(0.05, 0.95, (2, 3, 4, 3)).repeat(2, 1).repeat(2, 2)  # [2, 6, 8, 3]
    rgb += rng.uniform(-0.02, 0.02, rgb.shape[:3])[..., None]  # luma varies per pixel
    ycc = _ycbcr(rgb, *matrix)
    assert np.allclose(ycc[:, 0::2, 0::2, 1:], ycc[:, 1::2, 1::2, 1:])  # chroma per block
    if full:
        y, cb, cr = 255 * ycc[..., 0], 255 * ycc[..., 1] + 128, 255 * ycc[..., 2] + 128
    else:
        y, cb, cr = 16 + 219 * ycc[..., 0], 128 + 224 * ycc[..., 1], 128 + 224 * ycc[..., 2]
    back = to_rgb(y, cb[:, 0::2, 0::2], cr[:, 0::2, 0::2], full, matrix)
    np.testing.assert_allclose(back, rgb, rtol=0, atol=1e-12)


def test_stream_formats():
    assert stream_format("yuv420p(progressive)") == ("yuv420p", False, (0.299, 0.114))
    assert stream_format("yuv420p(tv, bt709, progressive)") == ("yuv420p", False,
                                                                (0.2126, 0.0722))
    assert stream_format("yuv420p(tv, bt709/bt709/iec61966-2-1)")[2] == (0.2126, 0.0722)
    assert stream_format("yuvj420p(pc, bt470bg/unknown/unknown)") == ("yuvj420p", True,
                                                                       (0.299, 0.114))
    assert stream_format("yuv420p(pc)")[1] is True
    # another layout, depth or an unknown matrix: read through ffmpeg's RGB
    for other in ("yuv444p", "yuv420p10le(tv, bt709)", "yuv420p(tv, bt2020nc/bt2020/smpte2084)",
                  "rgb24", "", "gbrp"):
        assert stream_format(other) is None, other


def _clip(tmp_path, seed=0, F=3, H=24, W=32):
    """Random colours in 2 x 4 px cells (edges inside and between chroma blocks), through
    our H.264 writer: the source (as the writer rounds it) and the decoded clip."""
    rng = np.random.default_rng(seed)
    cells = rng.uniform(0.1, 0.9, (F, H // 2 + 1, W // 4 + 1, 3))
    src = cells.repeat(2, 1).repeat(4, 2)[:, 1:H + 1, 3:W + 3]  # edges off the blocks' grid
    src = np.round(src * 255) / 255
    save_video(src, tmp_path / "clip.mp4", fps=30)
    return torch.from_numpy(src), load_video(tmp_path / "clip.mp4").to(torch.float64)


def test_an_mp4_is_read_from_its_planes(tmp_path):
    """Luma comes back within the studio range's rounding (ffmpeg's own 8-bit RGB was off
    by up to 2/255 per channel in saturated colours, a luma MSE of 1e-5 on a render),
    and the chroma is constant over each 2 x 2 block, as the planes hold it."""
    src, clip = _clip(tmp_path)
    m = torch.tensor(O._YCBCR, dtype=torch.float64)
    err = (clip @ m.T - src @ m.T)[..., 0]
    # (where a block's shared chroma takes a pixel's RGB out of [0, 1], the clip to the
    # range changes its luma: 1% of these random colours)
    inside = ((clip > 1e-6) & (clip < 1 - 1e-6)).all(-1)
    assert float(inside.double().mean()) > 0.9
    assert float(err[inside].abs().max()) <= 0.6 * LUMA_STEP, float(err[inside].abs().max())
    chroma = (clip @ m.T)[..., 1:]
    block_inside = inside[:, 0::2, 0::2] & inside[:, 1::2, 1::2]
    assert torch.allclose(chroma[:, 0::2, 0::2][block_inside],
                          chroma[:, 1::2, 1::2][block_inside], atol=1e-6)


def test_the_encoder_model_is_ffmpegs_chroma(tmp_path):
    """The decoded clip's chroma blocks equal chroma_420(source, encoded=True) within the
    8-bit chroma step; the block mean (the decoder's side) is several times further off."""
    src, clip = _clip(tmp_path, seed=1)
    stored = O.chroma_420(clip)[..., 1:]  # the planes, repeated over their blocks
    rms = {enc: float(((O.chroma_420(src, encoded=enc)[..., 1:] - stored) ** 2).mean().sqrt())
           for enc in (True, False)}
    assert rms[True] < 0.75 * CHROMA_STEP, rms
    assert rms[False] > 4 * rms[True], rms


def test_the_encoder_chroma_keeps_flat_colour_and_is_linear():
    gen = torch.Generator().manual_seed(0)
    flat = torch.rand(1, 1, 1, 3, generator=gen, dtype=torch.float64).expand(2, 6, 10, 3)
    torch.testing.assert_close(O.chroma_420(flat, encoded=True), O.chroma_420(flat),
                               rtol=0, atol=1e-15)
    x = torch.rand(1, 5, 4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda f: O.chroma_420(f, encoded=True), (x,))


@pytest.mark.parametrize("params", [
    ["-vf", "scale=out_color_matrix=bt709:out_range=tv", "-colorspace", "bt709",
     "-color_range", "tv"],  # a phone's HD clip
    ["-vf", "scale=out_color_matrix=bt601:out_range=pc", "-colorspace", "smpte170m",
     "-color_range", "pc"],  # full range: yuvj420p
])
def test_a_tagged_clip_is_read_with_its_matrix_and_range(tmp_path, params):
    """Clips ffmpeg writes with another matrix or range than our writer's: the tags are
    honoured (the wrong matrix or range would be off by several 1/100 in these colours)."""
    import imageio_ffmpeg

    from gradsim_taichi.render.yuv import read_yuv420

    cols = np.array([[0.8, 0.2, 0.2], [0.2, 0.7, 0.3], [0.3, 0.3, 0.8], [0.5, 0.5, 0.5]])
    src = np.round(np.broadcast_to(cols[:, None, None], (4, 16, 16, 3)) * 255).astype(np.uint8)
    w = imageio_ffmpeg.write_frames(str(tmp_path / "c.mp4"), (16, 16), fps=10,
                                    codec="libx264", quality=10, macro_block_size=1,
                                    pix_fmt_out="yuv420p", output_params=params)
    w.send(None)
    for f in src:
        w.send(np.ascontiguousarray(f))
    w.close()
    back = read_yuv420(tmp_path / "c.mp4")
    assert back is not None and back.shape == (4, 16, 16, 3)
    assert np.abs(back - src / 255).max() < 2.5 / 255
