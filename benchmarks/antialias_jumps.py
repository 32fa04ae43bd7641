"""Where the antialiased image is not continuous: a body slid across one pixel in tiny
steps, counting the steps at which a pixel's colour jumps.

    python benchmarks/antialias_jumps.py [--shapes box,cone,cylinder] [--steps 400]
                                         [--supersample 1] [--json PATH]

A continuous image changes by about the same small amount at every step (the edges move
by 1/steps of a pixel: about 1e-3 at the default 400). A step whose largest pixel change
is over 3e-3 is split 16 times again; if one sub-step still carries a change over 3e-3,
that is a jump. Each jump is classed by the faces around its pixel (the
3 x 3 window before and after, background included): two (an edge crossing a pixel
centre: continuous by design) or three and more (a junction: a crease meeting a
silhouette, or three faces meeting at a corner). The pixel-pair anti-aliasing blends a
pixel with the colour of its neighbour; at a junction that neighbour can show a third
face, not the one just across the edge, so the blend jumps when the pixels' faces
change. Jumps make an estimation's loss rough at small parameter changes (see
docs/other_engines_measurements.md).
"""

import argparse
import json
import os

import numpy as np
import torch

JUMP, SPLIT = 3e-3, 16
MESHES = {
    "box": lambda trimesh: trimesh.creation.box((0.5, 0.35, 0.3)),
    "cone": lambda trimesh: trimesh.creation.cone(0.25, 0.5, sections=16),
    "cylinder": lambda trimesh: trimesh.creation.cylinder(0.2, 0.45, sections=20),
}


def sweep(shape: str, steps: int, supersample: int) -> dict:
    import trimesh

    from gradsim_taichi.render import Camera, Mesh, SoftRasterizer
    from gradsim_taichi.render.raster_autograd import hard_face_ids

    f64 = torch.float64
    mesh = MESHES[shape](trimesh)
    mesh.apply_transform(trimesh.transformations.rotation_matrix(0.5, [0.3, 1.0, 0.2]))
    mesh.apply_translation([0.05, 0.3, 0.0])
    n = mesh.face_normals
    body = Mesh(mesh.faces, face_colors=np.clip(0.5 + 0.4 * n, 0, 1), smooth=False)
    ground = Mesh([[0, 1, 2], [0, 2, 3]], color=(0.4, 0.6, 0.4))
    gv = torch.tensor([[-2, 0, -2], [-2, 0, 2], [2, 0, 2], [2, 0, -2]], dtype=f64)
    size = 48
    cam = Camera.look_at((0.3, 0.9, 1.6), (0, 0.25, 0), fov_y_deg=40, width=size,
                         height=size, near=0.1, far=10)
    r = SoftRasterizer(cam, [body, ground], mode="antialias", supersample=supersample,
                       background=(1, 1, 1))
    v0 = torch.tensor(mesh.vertices, dtype=f64)
    d = torch.tensor([1.0, 0.37, 0.2], dtype=f64) / size  # about a pixel over the sweep

    def posed(ts):
        return [torch.stack([v0 + d * t for t in ts]), gv.expand(len(ts), 4, 3)]

    def render(ts):
        with torch.no_grad():
            return r(posed(ts))[..., :3]

    def face_ids(t):
        p, _ = r.prepare(posed([t]))
        return hard_face_ids(p["xy"], p["z"], r.settings)[0]

    ts = np.arange(steps) / steps
    img = render(ts)
    change = (img[1:] - img[:-1]).abs().amax((1, 2, 3))
    suspect = torch.nonzero(change > JUMP)[:, 0].tolist()
    jumps, junction = [], 0
    for k in suspect:
        sub_ts = (k + np.arange(SPLIT + 1) / SPLIT) / steps
        sub = (lambda x: (x[1:] - x[:-1]).abs().amax(-1))(render(sub_ts))
        u = int(sub.amax((1, 2)).argmax())
        size_u = float(sub[u].max())
        if size_u < JUMP:
            continue
        jumps.append(size_u)
        i, j = np.unravel_index(int(sub[u].argmax()), sub[u].shape)
        S = supersample
        rows, cols = slice(max(i * S - 1, 0), (i + 1) * S + 1), slice(max(j * S - 1, 0),
                                                                       (j + 1) * S + 1)
        faces = set(face_ids(sub_ts[u])[rows, cols].reshape(-1).tolist())
        faces |= set(face_ids(sub_ts[u + 1])[rows, cols].reshape(-1).tolist())
        junction += len(faces) >= 3
    return dict(shape=shape, supersample=supersample, steps=steps,
                median_step_change=float(change.median()), jumps=len(jumps),
                at_junctions=junction, jump_sum=float(np.sum(jumps)),
                largest=float(np.max(jumps)) if jumps else 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="box,cone,cylinder")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--supersample", type=int, default=1)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    shapes = a.shapes.split(",")
    for shape in shapes:
        if shape not in MESHES:
            p.error(f"--shapes: unknown shape {shape!r}; one of {', '.join(MESHES)}")
    if a.steps < 10:
        p.error(f"--steps must be at least 10, got {a.steps}")
    if a.supersample < 1:
        p.error(f"--supersample must be a positive integer, got {a.supersample}")
    if a.json and not os.access(os.path.dirname(os.path.abspath(a.json)), os.W_OK):
        p.error(f"--json: cannot write {a.json} (its folder is missing or not writable)")
    torch.set_num_threads(1)
    rows = []
    for shape in shapes:
        row = sweep(shape, a.steps, a.supersample)
        rows.append(row)
        print(f"{shape:9s} supersample {a.supersample}: median step change "
              f"{row['median_step_change']:.1e}, jumps {row['jumps']} "
              f"({row['at_junctions']} at junctions of 3+ faces), summed "
              f"{row['jump_sum']:.2f}, largest {row['largest']:.2f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
