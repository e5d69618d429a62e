"""Checks `medrun augment-preview` output and TensorBoard image summaries (augment-preview.test).

  pictures DIR
      every P_raw.png and P_augmented.png of DIR/samples.jsonl is a PNG (signature, chunk
      CRCs, 8-bit RGB) whose pixels are the picture AugmentPreview.h describes, drawn here
      again from the .npy volumes (grey levels from the sample's min/max, the slices, the
      label or affinity overlay; each byte within 1). Controls that must fail: the picture of
      another sample, and the picture without its overlay.
  same DIR MEDRUN ARTIFACT SEED
      the keys are stepKey(SEED, 0, step) (Philox 4x32-10 written again here; the key of
      step + 1 must not match), and for each step the samples stacked into a batch and run
      by `medrun run ARTIFACT --func augment` with that key (an int64 .npy) give exactly the
      written outputs; control: the key + 1 must give other outputs.
  differ DIR1 DIR2
      the raw and augmented volumes of the same sample names differ between the two.
  events LOGDIR [--none] [--png FILE]
      reads every event file (record framing, both masked CRC-32C, protobuf fields): prints
      the scalar events and image summaries; each image's PNG decodes to its width x height
      fields; --none: there must be scalar events and no image; --png FILE: the image of
      step 0 has FILE's pixels.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


# The PNG reader of check_progress_png.py (signature, chunk CRCs, IHDR 8-bit RGB, inflate,
# unfilter): (width, height, pixel(x, y) -> (r, g, b)).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_progress_png import decode  # noqa: E402

PALETTE = [(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
           (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
           (0, 128, 128), (170, 110, 40)]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def samples(d):
    with open(os.path.join(d, "samples.jsonl")) as f:
        return [json.loads(line) for line in f]


def png_array(path):
    with open(path, "rb") as f:
        w, h, px = decode(f.read())
    return np.array([[px(x, y) for x in range(w)] for y in range(h)], dtype=np.int64)


def picture(img, lab, mode):
    """img [1, C, D, H, W], lab [1, K, D, H, W] or None; mode labels|affinities|none."""
    v = img[0, 0].astype(np.float32)
    D, H, W = v.shape
    lo, hi = float(v.min()), float(v.max())
    rng = hi - lo
    g = np.rint(255.0 * (v.astype(np.float64) - lo) / rng) if rng > 0 else np.zeros(v.shape)
    rgb = np.stack([g, g, g], axis=-1)
    if lab is not None and mode != "none" and lab.shape[2:] == v.shape:
        l = lab[0].astype(np.float32)
        if mode == "labels":
            ids = np.rint(l[0]).astype(np.int64)
            paint = ids > 0
            over = np.array(PALETTE)[(np.maximum(ids, 1) - 1) % 12]
        else:
            paint = (l[:3] < 0.5).any(axis=0)
            over = np.broadcast_to(np.array([255, 0, 0]), rgb.shape)
        rgb = np.where(paint[..., None], np.rint(0.55 * rgb + 0.45 * over), rgb)
    k = max(1, 128 // max(D, H, W))
    out = np.zeros((k * max(H, D), k * (2 * W + H) + 8, 3))
    up = lambda a: np.repeat(np.repeat(a, k, axis=0), k, axis=1)  # noqa: E731
    p1, p2, p3 = up(rgb[D // 2]), up(rgb[:, H // 2]), up(rgb[:, :, W // 2])
    out[:p1.shape[0], :p1.shape[1]] = p1
    out[:p2.shape[0], k * W + 4:k * W + 4 + p2.shape[1]] = p2
    out[:p3.shape[0], 2 * k * W + 8:2 * k * W + 8 + p3.shape[1]] = p3
    return out.astype(np.int64)


def close(a, b):
    return a.shape == b.shape and np.abs(a - b).max() <= 1


def pictures(d):
    rows = samples(d)
    if not rows:
        fail("no samples")
    overlaid = {"raw": 0, "augmented": 0}
    for n, s in enumerate(rows):
        p = os.path.join(d, s["prefix"])
        other = os.path.join(d, rows[(n + 1) % len(rows)]["prefix"])
        mode = "affinities" if np.load(p + "_target.npy").shape[1] > 1 else "labels"
        for kind, img, lab, m in [("raw", "_raw_image", "_raw_seg", "labels"),
                                  ("augmented", "_image", "_target", mode)]:
            with open(p + "_" + kind + ".png", "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    fail(p + "_" + kind + ".png: not a PNG signature")
            got = png_array(p + "_" + kind + ".png")
            want = picture(np.load(p + img + ".npy"), np.load(p + lab + ".npy"), m)
            if not close(got, want):
                fail("%s_%s.png: %s, expected %s; %d bytes off by > 1" % (
                    p, kind, got.shape, want.shape,
                    (np.abs(got - want) > 1).sum() if got.shape == want.shape else -1))
            if close(got, picture(np.load(other + img + ".npy"), np.load(other + lab + ".npy"), m)):
                fail("control: %s_%s.png is also the picture of another sample" % (p, kind))
            plain = picture(np.load(p + img + ".npy"), None, "none")
            painted = not close(want, plain)  # the overlay shows in the slices drawn
            overlaid[kind] += painted
            if painted and close(got, plain):
                fail("control: %s_%s.png is also the picture without its overlay" % (p, kind))
            print("%s_%s.png: %dx%d ok%s (controls fail)" % (
                s["prefix"], kind, got.shape[1], got.shape[0], ", overlay" if painted else ""))
    if not all(overlaid.values()):
        fail("no picture shows an overlay: %s" % overlaid)


MASK = 0xFFFFFFFF


def philox(c, k):
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & MASK, p1 & MASK, ((p0 >> 32) ^ c[3] ^ k[1]) & MASK,
             p0 & MASK]
        k = [(k[0] + 0x9E3779B9) & MASK, (k[1] + 0xBB67AE85) & MASK]
    return c


def step_key(seed, rank, step):
    c = philox([step & MASK, step >> 32, rank, 0x646E6172], [seed & MASK, seed >> 32])
    v = (c[1] << 32) | c[0]
    return v - (1 << 64) if v >= 1 << 63 else v


def same(d, medrun, artifact, seed):
    rows = samples(d)
    steps = sorted({s["step"] for s in rows})
    tmp = tempfile.mkdtemp()
    for step in steps:
        batch = [s for s in rows if s["step"] == step]
        key = batch[0]["key"]
        if key != step_key(seed, 0, step) or any(s["key"] != key for s in batch):
            fail("step %d: key %d, stepKey gives %d" % (step, key, step_key(seed, 0, step)))
        if int(np.load(os.path.join(d, "step%d_rng.npy" % step))) != key:
            fail("step%d_rng.npy is not the key %d" % (step, key))
        if key == step_key(seed, 0, step + 1):
            fail("control: the key of step %d is also that of step %d" % (step, step + 1))
        pre = [os.path.join(d, s["prefix"]) for s in sorted(batch, key=lambda s: s["sample"])]
        np.save(os.path.join(tmp, "image.npy"), np.concatenate([np.load(p + "_raw_image.npy") for p in pre]))
        np.save(os.path.join(tmp, "seg.npy"), np.concatenate([np.load(p + "_raw_seg.npy") for p in pre]))
        outs = {}
        for name, k in [("key", key), ("control", key + 1)]:
            np.save(os.path.join(tmp, "rng.npy"), np.array(k, dtype=np.int64))
            o = os.path.join(tmp, name)
            subprocess.run([medrun, "run", artifact, "--func", "augment", "--input",
                            "image=" + os.path.join(tmp, "image.npy"), "--input",
                            "seg=" + os.path.join(tmp, "seg.npy"), "--input",
                            "rng=" + os.path.join(tmp, "rng.npy"), "--out", o],
                           check=True, stdout=subprocess.DEVNULL)
            outs[name] = {os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(o + "/*.npy")}
        names = sorted(outs["key"])
        for name in names:
            for b, p in enumerate(pre):
                mine = np.load(p + "_" + name + ".npy")
                if mine.shape[0] != 1 or not np.array_equal(mine[0], outs["key"][name][b]):
                    fail("%s_%s.npy differs from medrun run --func augment" % (p, name))
        if all(np.array_equal(outs["key"][n], outs["control"][n]) for n in names):
            fail("control: step %d's outputs do not depend on the key" % step)
        print("step %d: %d samples, outputs %s equal medrun run --func augment exactly; "
              "key %d = stepKey(%d, 0, %d); another key differs" % (step, len(pre), ",".join(names), key, seed, step))


def differ(d1, d2):
    r1, r2 = samples(d1), samples(d2)
    for a, b in zip(r1, r2):
        if a["key"] == b["key"]:
            fail("same key %d in both" % a["key"])
        for name in ["raw_image", "image"]:
            x = np.load(os.path.join(d1, a["prefix"] + "_" + name + ".npy"))
            y = np.load(os.path.join(d2, b["prefix"] + "_" + name + ".npy"))
            if np.array_equal(x, y):
                fail("%s and %s: the same %s" % (a["prefix"], b["prefix"], name))
    print("%d samples differ (keys, raw and augmented images)" % min(len(r1), len(r2)))


# ---- TensorBoard event files ------------------------------------------------------------

def _table():
    t = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = _table()


def masked_crc(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & MASK


def varint(b, i):
    v, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7


def fields(msg):
    out, i = [], 0
    while i < len(msg):
        key, i = varint(msg, i)
        f, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(msg, i)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            v, i = msg[i:i + n], i + n
        elif wire == 2:
            n, i = varint(msg, i)
            v, i = msg[i:i + n], i + n
        else:
            fail("wire type %d" % wire)
        out.append((f, v))
    return out


def events(logdir, none, png):
    scalars, images = [], []
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    if not files:
        fail("no event file in " + logdir)
    for path in files:
        data, i = open(path, "rb").read(), 0
        while i < len(data):
            (n,) = struct.unpack_from("<Q", data, i)
            if masked_crc(data[i:i + 8]) != struct.unpack_from("<I", data, i + 8)[0]:
                fail("%s: length CRC at %d" % (path, i))
            payload = data[i + 12:i + 12 + n]
            if masked_crc(payload) != struct.unpack_from("<I", data, i + 12 + n)[0]:
                fail("%s: data CRC at %d" % (path, i))
            i += 16 + n
            ev = dict((f, v) for f, v in fields(payload) if f != 5)
            for f, summary in fields(payload):
                if f != 5:
                    continue
                for _, value in fields(summary):
                    vf = dict(fields(value))
                    if 2 in vf:
                        scalars.append((ev.get(2, 0), vf[1].decode()))
                    if 4 in vf:
                        im = dict(fields(vf[4]))
                        images.append((ev.get(2, 0), vf[1].decode(), im))
    for step, tag, im in images:
        w, h, _ = decode(im[4])
        if (w, h) != (im[2], im[1]) or im[3] != 3:
            fail("image %s at step %d: PNG %dx%d, fields %dx%d colorspace %d" % (tag, step, w, h, im[2], im[1], im[3]))
        print("image %s step %d: %dx%d RGB PNG" % (tag, step, w, h))
    print("%d scalar values, %d images" % (len(scalars), len(images)))
    if none and (images or not scalars):
        fail("expected scalars and no image")
    if not none and not images:
        fail("no image summary")
    if png:
        first = [im for step, _, im in images if step == 0]
        if not first:
            fail("no image at step 0")
        with tempfile.NamedTemporaryFile(suffix=".png") as f:
            f.write(first[0][4])
            f.flush()
            got = png_array(f.name)
        if not np.array_equal(got, png_array(png)):
            fail("the image of step 0 is not " + png)
        print("the image of step 0 has the pixels of " + os.path.basename(png))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "pictures":
        pictures(a[1])
    elif a[0] == "same":
        same(a[1], a[2], a[3], int(a[4]))
    elif a[0] == "differ":
        differ(a[1], a[2])
    elif a[0] == "events":
        png = a[a.index("--png") + 1] if "--png" in a else None
        events(a[1], "--none" in a, png)
    else:
        fail("unknown command " + a[0])
