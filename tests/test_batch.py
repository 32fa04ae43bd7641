"""`gradsim-taichi estimate-batch`: the manifest, failures isolated, resume, in-process
and on Ray (tests that need Ray skip without it), results equal to one-by-one runs."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from runtime_arch import TEST_ARCH

import gradsim_taichi as gs
from gradsim_taichi.batch import (
    ManifestError,
    parse_item,
    read_manifest,
    row_from_report,
    run_batch,
    write_summary,
)
from gradsim_taichi.cli import main
from gradsim_taichi.estimation import estimate, render_target
from gradsim_taichi.scenes import make_preset

SMALL = dict(scene="rigid-mass", frames=6, resolution=16, iters=2)
SETTINGS = dict(arch=TEST_ARCH, precision="f64", threads=1)
# four items: shapes, seeds and one drawn truth differ
GOOD = [dict(SMALL, id="box0", shape="box", seed=0),
        dict(SMALL, id="cone1", shape="cone", seed=1, truth={"mass": 7.5}),
        dict(SMALL, id="cyl2", shape="cylinder", seed=2),
        dict(SMALL, id="box3", shape="box", seed=3, iters=3, optimizer="adam", lr=0.1)]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def one_by_one(records) -> dict:
    """The reference: each item through `estimate()` in this process, one at a time."""
    gs.init(**SETTINGS)
    out = {}
    for r in records:
        scene = make_preset(r["scene"], frames=r["frames"], resolution=r["resolution"],
                            shape=r["shape"])
        if "truth" in r:
            scene.set_truth(r["truth"])
        result = estimate(scene, render_target(scene), iters=r["iters"], seed=r["seed"],
                          optimizer=r.get("optimizer"), lr=r.get("lr"), progress=False)
        out[r["id"]] = (float(result.params["mass"]), float(result.true["mass"]))
    return out


def estimates(out) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    return {r["id"]: r for r in summary["rows"]}


def check_equal(rows, reference):
    for key, (mass, true) in reference.items():
        assert rows[key]["status"] == "done", rows[key]["message"]
        assert rows[key]["params"]["mass"]["true"] == true
        assert abs(rows[key]["params"]["mass"]["estimate"] - mass) <= 1e-12 * mass


# ---- the manifest (no estimation) ----------------------------------------------------------

def test_manifest_errors_name_their_lines(tmp_path):
    lines = ['{"id": "a", "scene": "rigid-mass"}',
             '{"id": "b", "scene": "rigid-mass",',          # 2: not JSON
             '',
             '{"scene": "rigid-mass"}',                     # 4: no id
             '{"id": "a", "scene": "fem-beam"}',            # 5: duplicate
             '{"id": "c", "scene": "rigid-mass", "iters": 0}',  # 6: bad value
             '{"id": "d", "scene": "rigid-mass", "colour": "red"}']  # 7: unknown key
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ManifestError) as e:
        read_manifest(path)
    msg = str(e.value)
    assert "line 2: not valid JSON" in msg
    assert "line 4: missing 'id'" in msg
    assert "line 5: duplicate id 'a' (first on line 1)" in msg
    assert "line 6: iters must be an integer >= 1" in msg
    assert "line 7: unknown key 'colour'" in msg
    assert "line 1" not in msg.replace("first on line 1", "")


def test_cli_reports_a_bad_manifest_without_running(tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "a/b", "scene": "rigid-mass"}\n')
    assert main(["estimate-batch", str(path), "--out", str(tmp_path / "o"),
                 "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "line 1: id 'a/b'" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "items").exists()


def test_csv_and_jsonl_give_the_same_items(tmp_path):
    csv_path = tmp_path / "m.csv"
    csv_path.write_text("id,scene,shape,seed,target,truth,iters,lr,params\n"
                        "a,rigid-mass,cone,3,,mass=7.5,4,0.5,mass\n"
                        'b,rigid-contact,box,1,clip.mp4,,,,"mass,contact_mu"\n')
    jsonl = write_jsonl(tmp_path / "m.jsonl", [
        dict(id="a", scene="rigid-mass", shape="cone", seed=3, truth={"mass": 7.5},
             iters=4, lr=0.5, params=["mass"]),
        dict(id="b", scene="rigid-contact", shape="box", seed=1, target="clip.mp4",
             params="mass,contact_mu")])
    a, b = read_manifest(csv_path), read_manifest(jsonl)
    assert [x.id for x in a] == ["a", "b"] and [x.line for x in a] == [2, 3]
    for x, y in zip(a, b):
        assert (x.scene, x.shape, x.seed, x.truth, x.iters, x.lr, x.params, x.target) == \
               (y.scene, y.shape, y.seed, y.truth, y.iters, y.lr, y.params, y.target)
    assert a[1].target == str(tmp_path / "clip.mp4") and a[0].target is None
    assert parse_item({"id": 7, "scene": "x", "target": "synthetic"}).target is None
    with pytest.raises(ManifestError, match="seed must be an integer"):
        parse_item({"id": "a", "scene": "x", "seed": "one"}, from_csv=True)


def test_a_run_stopped_by_nan_is_a_failed_item(tmp_path):
    report = dict(status="stopped", message="stopped at iteration 3: the loss became NaN/inf",
                  iterations=3, seconds=1.5,
                  params={"mass": {"init": 3.0, "estimate": 4.0, "true": 5.0,
                                   "abs_err": 1.0, "rel_err": 0.2}})
    (tmp_path / "report.json").write_text(json.dumps(report))
    item = parse_item({"id": "n", "scene": "rigid-mass"})
    row = row_from_report(item, tmp_path / "report.json")
    assert row["status"] == "failed" and "NaN" in row["message"]
    summary = write_summary(tmp_path, [row], plot=False)
    assert summary["failed"] == 1 and summary["failures"][0]["id"] == "n"
    assert summary["params"] == {}  # a failed item's errors are not counted


# ---- in this process ------------------------------------------------------------------------

@pytest.mark.usefixtures("quick_calibration")
def test_in_process_equals_one_by_one_and_isolates_failures(tmp_path, capsys):
    reference = one_by_one(GOOD[:2])  # the two good items of this manifest
    bad_video = tmp_path / "corrupt.mp4"
    bad_video.write_bytes(b"this is not a video" * 10)
    records = GOOD[:2] + [dict(SMALL, id="corrupt", target="corrupt.mp4"),
                          dict(SMALL, id="unknown", scene="no-such-scene")]
    manifest = write_jsonl(tmp_path / "m.jsonl", records)
    out = tmp_path / "out"
    status = main(["estimate-batch", str(manifest), "--out", str(out), "--workers", "1",
                   "--quiet", "--arch", TEST_ARCH, "--threads", "1"])
    assert status == 3  # some items failed
    rows = estimates(out)
    check_equal({k: rows[k] for k in ("box0", "cone1")}, reference)
    assert rows["corrupt"]["status"] == "failed"
    assert "cannot read video" in rows["corrupt"]["message"]
    assert rows["unknown"]["status"] == "failed"
    assert "unknown scene 'no-such-scene'" in rows["unknown"]["message"]
    assert json.loads((out / "items" / "corrupt" / "error.json").read_text())["status"] \
        == "failed"
    # each done item's folder is what `estimate` writes
    for name in ("report.json", "loss.png", "compare.mp4", "compare.gif", "state.pt"):
        assert (out / "items" / "box0" / name).stat().st_size > 100
    assert (out / "summary.png").stat().st_size > 1000
    summary_csv = (out / "summary.csv").read_text().splitlines()
    assert summary_csv[0].startswith("id,scene,shape,status") and len(summary_csv) == 5
    printed = capsys.readouterr().out
    assert "2 of 4 items done, 2 failed" in printed and "corrupt failed" in printed


# (batch items equal estimate(): test_in_process_equals_one_by_one_and_isolates_failures and
# test_scene_file_items_run_and_bad_files_fail_alone; the CLI command here: slow tier)
@pytest.mark.slow
@pytest.mark.usefixtures("quick_calibration")
def test_batch_item_equals_the_estimate_command(tmp_path):
    """The same folder contents and numbers as `gradsim-taichi estimate`."""
    args = ["--frames", "6", "--resolution", "16", "--iters", "2", "--seed", "5"]
    assert main(["estimate", "rigid-mass", *args, "--out", str(tmp_path / "one"), "--quiet",
                 "--arch", TEST_ARCH, "--threads", "1"]) == 0
    manifest = write_jsonl(tmp_path / "m.jsonl", [dict(SMALL, id="x", seed=5)])
    run_batch(read_manifest(manifest), tmp_path / "b", workers=1, settings=SETTINGS,
              progress=False, plot=False)
    one = json.loads((tmp_path / "one" / "report.json").read_text())
    two = json.loads((tmp_path / "b" / "items" / "x" / "report.json").read_text())
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == \
           sorted(p.name for p in (tmp_path / "b" / "items" / "x").iterdir())
    assert two["params"]["mass"]["estimate"] == pytest.approx(
        one["params"]["mass"]["estimate"], rel=1e-12, abs=0)
    assert two["loss_history"] == pytest.approx(one["loss_history"], rel=1e-12, abs=0)
    # (the command also records its own-video options, which a manifest item has not)
    own_video = {"shape", "mask", "background_plate", "silhouette_weight", "mask_erode",
                 "ignore_shadows", "damping"}
    assert {k: v for k, v in two["settings"].items() if k not in ("id", "shape", "attempt")} \
        == {k: v for k, v in one["settings"].items() if k not in own_video}
    assert all(not one["settings"][k] for k in own_video - {"shape"})  # all at defaults


@pytest.mark.usefixtures("quick_calibration")
def test_resume_skips_finished_items_and_reruns_the_rest(tmp_path):
    records = [GOOD[0], GOOD[2]]
    items = read_manifest(write_jsonl(tmp_path / "m.jsonl", records))
    out = tmp_path / "out"
    run_batch(items, out, workers=1, settings=SETTINGS, progress=False, plot=False)
    done = out / "items" / "box0" / "report.json"
    stamp = done.stat().st_mtime_ns
    # cyl2 as if interrupted before its end: no report, and its resume state marked (a
    # loss no run computes) to tell a resumed run from a fresh one
    folder = out / "items" / "cyl2"
    (folder / "report.json").unlink()
    state = torch.load(folder / "state.pt", weights_only=False)
    state["history"][0]["loss"] = 123.0
    torch.save(state, folder / "state.pt")
    summary = run_batch(items, out, workers=1, resume=True, settings=SETTINGS,
                        progress=False, plot=False)
    assert done.stat().st_mtime_ns == stamp  # skipped, not re-run
    report = json.loads((folder / "report.json").read_text())
    assert report["loss_history"][0] == 123.0  # resumed from its own state
    assert summary["done"] == 2 and [r["id"] for r in summary["rows"]] == ["box0", "cyl2"]
    # without --resume every item starts afresh (its old state dropped)
    run_batch(items, out, workers=1, settings=SETTINGS, progress=False, plot=False)
    assert done.stat().st_mtime_ns != stamp
    assert json.loads((folder / "report.json").read_text())["loss_history"][0] != 123.0


def test_without_ray_more_workers_say_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails
    manifest = write_jsonl(tmp_path / "m.jsonl", [dict(SMALL, id="a")])
    assert main(["estimate-batch", str(manifest), "--out", str(tmp_path / "o"),
                 "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'gradsim-taichi[cluster]'" in err and "--workers 1" in err


# ---- on Ray ---------------------------------------------------------------------------------

def test_ray_two_workers_equal_one_by_one(tmp_path):
    pytest.importorskip("ray")
    reference = one_by_one(GOOD)
    bad_video = tmp_path / "corrupt.mp4"
    bad_video.write_bytes(b"\x00garbage" * 50)
    records = GOOD + [dict(SMALL, id="corrupt", target=str(bad_video)),
                      dict(SMALL, id="unknown", scene="no-such-scene")]
    items = read_manifest(write_jsonl(tmp_path / "m.jsonl", records))
    summary = run_batch(items, tmp_path / "out", workers=2, settings=SETTINGS,
                        progress=False)
    rows = {r["id"]: r for r in summary["rows"]}
    check_equal(rows, reference)
    assert all(rows[k]["attempts"] == 1 for k in reference)
    assert rows["corrupt"]["status"] == "failed" and "cannot read video" in \
        rows["corrupt"]["message"]
    assert rows["unknown"]["status"] == "failed" and "unknown scene" in \
        rows["unknown"]["message"]
    assert summary["done"] == 4 and summary["failed"] == 2
    rel = [rows[k]["params"]["mass"]["rel_err"] for k in reference]
    assert summary["params"]["mass"]["max_rel_err"] == pytest.approx(max(rel))
    assert summary["params"]["mass"]["median_rel_err"] == pytest.approx(np.median(rel))


def _wait_for(condition, timeout, what):
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow
def test_killed_worker_is_retried_and_killed_driver_resumes(tmp_path):
    pytest.importorskip("ray")
    records = [dict(SMALL, id=f"i{k}", seed=k, iters=12, optimizer="adam", lr=0.05)
               for k in range(3)]
    manifest = write_jsonl(tmp_path / "m.jsonl", records)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "gradsim_taichi", "estimate-batch", str(manifest), "--out",
           str(out), "--quiet", "--arch", TEST_ARCH]
    # 1. kill the worker running i0 mid-item: it is retried (resumed), nothing lost
    driver = subprocess.Popen(cmd + ["--workers", "2"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    lock = out / "items" / "i0" / ".lock"
    _wait_for(lambda: lock.exists() and lock.read_text().strip().isdigit()
              and (out / "items" / "i0" / "state.pt").exists(), 240, "i0 to start")
    os.kill(int(lock.read_text()), signal.SIGKILL)
    text = driver.communicate(timeout=300)[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["done"] == 3, text
    rows = {r["id"]: r for r in summary["rows"]}
    assert rows["i0"]["attempts"] == 2 and len(summary["rows"]) == 3
    # 2. kill the driver after the first item: --resume finishes only what was left
    out2 = tmp_path / "out2"
    cmd2 = [c if c != str(out) else str(out2) for c in cmd] + ["--workers", "1"]
    driver = subprocess.Popen(cmd2, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = out2 / "items" / "i0" / "report.json"
    _wait_for(first.exists, 240, "the first item")
    driver.kill()
    driver.wait()
    stamp = first.stat().st_mtime_ns
    assert subprocess.run(cmd2 + ["--resume"], capture_output=True).returncode == 0
    assert first.stat().st_mtime_ns == stamp
    assert json.loads((out2 / "summary.json").read_text())["done"] == 3


@pytest.mark.usefixtures("quick_calibration")
def test_items_take_the_own_video_options_fit_render_and_loss(tmp_path):
    """fit, render and loss reach the item's estimation; a bad one fails that item alone,
    named."""
    from gradsim_taichi.render import save_video

    gs.init(arch=TEST_ARCH, precision="f64")
    scene = make_preset("rigid-mass", frames=SMALL["frames"], resolution=SMALL["resolution"])
    save_video(render_target(scene), tmp_path / "clip.gif")
    records = [dict(SMALL, id="fitted", fit="background", loss="robust", render="antialias"),
               dict(SMALL, id="video", target="clip.gif", restarts=1, iters=1, fit="-blur"),
               dict(SMALL, id="badfit", fit="lights"),
               dict(SMALL, id="badrender", render="pastel")]
    items = read_manifest(write_jsonl(tmp_path / "m.jsonl", records))
    assert (items[0].fit, items[0].loss, items[0].render) == ("background", "robust",
                                                              "antialias")
    run_batch(items, tmp_path / "b", workers=1, settings=SETTINGS, progress=False, plot=False)
    report = json.loads((tmp_path / "b" / "items" / "fitted" / "report.json").read_text())
    assert report["settings"]["fit"] == ["background"]
    assert report["settings"]["render"] == "antialias" and report["settings"]["loss"] == "robust"
    assert report["nuisance"]["background"]["source"] == "solved per pixel"
    # a target video: the command's defaults for a video the engine did not make, less
    # the blur
    settings = json.loads((tmp_path / "b" / "items" / "video" / "report.json").read_text())[
        "settings"]
    assert settings["fit"] == ["background", "appearance", "shadow", "bounce", "response"]
    assert settings["loss"] == "robust"
    rows = estimates(tmp_path / "b")
    assert rows["badfit"]["status"] == "failed" and "unknown kind 'lights'" in \
        rows["badfit"]["message"]
    assert rows["badrender"]["status"] == "failed" and "pastel" in rows["badrender"]["message"]


@pytest.mark.usefixtures("quick_calibration")
def test_items_take_the_contact_stage_hold_flight_and_restarts(tmp_path):
    """stage_contact, hold_flight and restarts reach the item's estimation (CSV and JSON
    agree; a bad flag stops the manifest, named)."""
    csv_path = tmp_path / "m.csv"
    csv_path.write_text("id,scene,frames,resolution,iters,stage_contact,hold_flight,restarts\n"
                        "held,rigid-mass,16,16,4,2,true,1\n")
    jsonl = write_jsonl(tmp_path / "m.jsonl", [dict(
        id="held", scene="rigid-mass", frames=16, resolution=16, iters=4, stage_contact=2,
        hold_flight=True, restarts=1)])
    (a,), (b,) = read_manifest(csv_path), read_manifest(jsonl)
    assert (a.stage_contact, a.hold_flight, a.restarts) == (2, True, 1) == \
        (b.stage_contact, b.hold_flight, b.restarts)
    with pytest.raises(ManifestError, match="hold_flight must be true or false"):
        parse_item({"id": "a", "scene": "x", "hold_flight": "maybe"}, from_csv=True)
    run_batch([a], tmp_path / "b", workers=1, settings=SETTINGS, progress=False, plot=False)
    report = json.loads((tmp_path / "b" / "items" / "held" / "report.json").read_text())
    assert report["settings"]["hold_flight"] is True
    assert report["settings"]["stage_contact"] == 2
    assert report["iterations"] == 2 and "nothing left to fit" in report["message"]


# ---- scene files as items -------------------------------------------------------------------

CLIP = """
[scene]
name = "clip"
fps = 60.0
frames = 6
width = 16
height = 16

[camera]
eye = [0.0, 0.8, 1.8]
target = [0.0, 0.2, 0.0]

[shapes]
cone = { shape = "cone", radius = 0.2, height = 0.4, sections = 12 }

[[objects]]
kind = "rigid"
shape = "box"
extents = [0.4, 0.3, 0.3]
position = [-0.4, 0.4, 0.0]
orientation = [0.95, 0.09, 0.29, 0.06]
mass = { unknown = true, guess_low = 2.0, guess_high = 12.0, true = 4.0 }

[[pushes]]
object = 0
kind = "impulse"
vector = [3.0, 1.0, 0.0]
point = [0.0, 0.1, 0.1]
duration = 0.016666666666666666
"""


def test_a_manifest_scene_is_a_preset_or_a_scene_file_relative_to_it(tmp_path):
    item = parse_item({"id": "a", "scene": "clips/x.toml"}, base=tmp_path)
    assert item.scene == "clips/x.toml" and item.scene_file == str(tmp_path / "clips/x.toml")
    assert parse_item({"id": "b", "scene": "rigid-mass"}, base=tmp_path).scene_file is None


@pytest.mark.usefixtures("quick_calibration")
def test_scene_file_items_run_and_bad_files_fail_alone(tmp_path):
    from gradsim_taichi.scenes.scene_file import load_scene_file

    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "box.toml").write_text(CLIP)
    (tmp_path / "clips" / "bad.toml").write_text(CLIP.replace('shape = "box"',
                                                              'shape = "cube"'))
    (tmp_path / "clips" / "guess.toml").write_text(CLIP.replace(", true = 4.0", ""))
    records = [dict(id="box", scene="clips/box.toml", iters=2, seed=1),
               dict(id="cone", scene="clips/box.toml", shape="cone", iters=2, seed=1,
                    truth={"mass": 6.0}),
               dict(id="guess", scene="clips/guess.toml", iters=2, truth={"mass": 5.0}),
               dict(id="missing", scene="clips/nowhere.toml"),
               dict(id="bad", scene="clips/bad.toml"),
               dict(id="notruth", scene="clips/guess.toml"),
               dict(id="pyramid", scene="clips/box.toml", shape="pyramid")]
    manifest = write_jsonl(tmp_path / "m.jsonl", records)
    summary = run_batch(read_manifest(manifest), tmp_path / "out", workers=1,
                        settings=SETTINGS, progress=False, plot=False)
    rows = {r["id"]: r for r in summary["rows"]}
    assert [k for k, r in rows.items() if r["status"] == "done"] == ["box", "cone", "guess"]
    messages = {k: r["message"] for k, r in rows.items()}
    assert "scene file not found" in messages["missing"] and "nowhere.toml" in \
        messages["missing"]
    assert "bad.toml" in messages["bad"] and "objects[0].shape: expected one of" in \
        messages["bad"]
    assert "guess.toml" in messages["notruth"] and "true value for mass" in \
        messages["notruth"]
    assert "box.toml" in messages["pyramid"] and "shape 'pyramid': the file offers cone" \
        in messages["pyramid"]
    # a done item is the estimate of the file's scene, as estimate() gives it
    for r, truth in zip(records[:3], (4.0, 6.0, 5.0)):
        scene = load_scene_file(tmp_path / r["scene"], shape=r.get("shape"))
        scene.set_truth({"mass": truth})
        result = estimate(scene, render_target(scene), iters=2, seed=r.get("seed", 0),
                          progress=False)
        key = r["id"]
        got = rows[key]["params"]["mass"]
        assert got["true"] == truth
        assert abs(got["estimate"] - float(result.params["mass"])) <= 1e-12 * truth
    report = json.loads((tmp_path / "out" / "items" / "cone" / "report.json").read_text())
    assert report["settings"]["scene_file"] == str(tmp_path / "clips" / "box.toml")
    assert report["settings"]["shape"] == "cone"
