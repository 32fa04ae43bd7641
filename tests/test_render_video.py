"""save_video / load_video round trips and errors."""

import numpy as np
import pytest
import torch

from gradsim_taichi.render import load_video, save_video


def _frames(F=5, H=32, W=48, C=4):
    """Smooth colour ramps that move (video codecs keep them nearly intact)."""
    t = torch.linspace(0, 1, F)[:, None, None]
    y = torch.linspace(0, 1, H)[None, :, None]
    x = torch.linspace(0, 1, W)[None, None, :]
    chans = [(x + t) % 1.0 * 0.8 + 0.1, y.expand(F, H, W) * 0.8 + 0.1, 0.5 + 0.3 * x * y + 0 * t]
    if C == 4:
        chans.append(torch.ones(F, H, W))
    return torch.stack([c.expand(F, H, W) for c in chans], -1).to(torch.float64)


def test_gif_round_trip(tmp_path):
    frames = _frames()
    path = save_video(frames, tmp_path / "a.gif", fps=10)
    back = load_video(path)
    assert back.shape == (5, 32, 48, back.shape[-1]) and back.shape[-1] in (3, 4)
    assert back.dtype == torch.float32 and 0 <= back.min() and back.max() <= 1
    assert (back[..., :3] - frames[..., :3].float()).abs().mean() < 0.03


def test_mp4_round_trip(tmp_path):
    frames = _frames(F=6, H=33, W=48, C=3)  # odd height is padded
    path = save_video(frames.numpy(), tmp_path / "b.mp4", fps=24)
    back = load_video(path)
    assert back.shape == (6, 34, 48, 3)
    assert (back[:, :33] - frames.float()).abs().mean() < 0.03


def test_png_folder_round_trip(tmp_path):
    frames = _frames(F=3)
    folder = save_video(frames, tmp_path / "frames")
    assert len(list(folder.glob("*.png"))) == 3
    back = load_video(folder)
    assert back.shape == (3, 32, 48, 3)
    assert (back - frames[..., :3].float()).abs().max() <= 0.5 / 255 + 1e-6


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        load_video(tmp_path / "nope.mp4")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no image files"):
        load_video(empty)
    corrupt = tmp_path / "bad.mp4"
    corrupt.write_bytes(b"this is not a video" * 50)
    with pytest.raises(ValueError, match="bad.mp4"):
        load_video(corrupt)
    corrupt_gif = tmp_path / "bad.gif"
    corrupt_gif.write_bytes(b"GIF89a garbage")
    with pytest.raises(ValueError, match="bad.gif"):
        load_video(corrupt_gif)
    zero = tmp_path / "zero.gif"
    zero.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        load_video(zero)
    with pytest.raises(ValueError, match="suffix"):
        save_video(_frames(), tmp_path / "x.xyz")
    with pytest.raises(ValueError, match="frames must be"):
        save_video(np.zeros((2, 3)), tmp_path / "y.gif")


def test_npy_arrays(tmp_path):
    frames = _frames(F=4, C=3).numpy()
    np.save(tmp_path / "f.npy", frames)  # float64: read as float32, no rounding to 8 bits
    back = load_video(tmp_path / "f.npy")
    assert back.dtype == torch.float32 and back.shape == (4, 32, 48, 3)
    assert np.abs(back.numpy() - frames).max() < 1e-6
    u8 = (frames * 255).round().astype(np.uint8)
    np.save(tmp_path / "u8.npy", u8)
    assert np.abs(load_video(tmp_path / "u8.npy").numpy() * 255 - u8).max() < 1e-4
    np.save(tmp_path / "grey.npy", frames[..., 0])
    grey = load_video(tmp_path / "grey.npy")
    assert grey.shape == (4, 32, 48, 3) and torch.equal(grey[..., 0], grey[..., 2])
    bad = {"shape": frames[0, 0], "nan": np.where(frames > 0.5, np.nan, frames),
           "range": frames * 2.0, "dtype": frames.astype(np.int32)}
    for name, a in bad.items():
        np.save(tmp_path / f"{name}.npy", a)
    for name, msg in (("shape", "expected an array"), ("nan", "NaN"), ("range", r"not in \[0, 1\]"),
                      ("dtype", "dtype int32")):
        with pytest.raises(ValueError, match=msg):
            load_video(tmp_path / f"{name}.npy")
    (tmp_path / "corrupt.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(ValueError, match="corrupt.npy"):
        load_video(tmp_path / "corrupt.npy")


def test_numbered_frames_load_in_the_numbers_order(tmp_path):
    import imageio.v2 as iio

    from gradsim_taichi.render import load_video

    folder = tmp_path / "frames"
    folder.mkdir()
    for k in range(12):  # frame_2.png sorts after frame_10.png by name
        iio.imwrite(folder / f"frame_{k}.png", np.full((4, 4, 3), 10 * k, np.uint8))
    levels = load_video(folder)[:, 0, 0, 0].numpy() * 255
    assert np.allclose(levels, 10 * np.arange(12))


def test_a_containers_frame_rate_is_read(tmp_path):
    from gradsim_taichi.render.video import video_fps

    frames = np.random.default_rng(0).uniform(size=(4, 16, 16, 3))
    assert video_fps(save_video(frames, tmp_path / "clip.mp4", fps=24)) == 24.0
    assert video_fps(save_video(frames, tmp_path / "clip.gif", fps=24)) is None
    assert video_fps(save_video(frames, tmp_path / "pngs")) is None
