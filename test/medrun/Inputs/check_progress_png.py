"""Checks a run's progress.png with the standard library only (validation.test):

- the PNG itself: signature, every chunk's CRC, IHDR (8-bit RGB, not interlaced), the
  IDAT stream inflated with zlib and unfiltered (filters 0-4) into pixels, IEND last;
- the curves: from RUN/metrics.jsonl and the layout docs/training.md gives (plot area
  left 50, right width-50, top 20, bottom height-30; x from the first to the last step;
  loss axis from the lowest to the highest loss with 5% margins; Dice axis 0..1), each
  validation's dot is green and each point of the loss's moving average is blue (or under a
  validation curve drawn over it).

`check_progress_png.py RUN` prints "progress.png: ..." and exits 0 if all holds.
Negative controls, each must fail: `--shift D` moves the expected Dice values by D,
`--corrupt` flips a byte of the image data in a copy, `--blank` checks a white image
of the same size."""
import json
import math
import os
import struct
import sys
import zlib

DICE, LOSS_AVG, DICE_EMA = (44, 160, 44), (31, 119, 180), (255, 127, 14)


def decode(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    i, chunks = 8, []
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        (crc,) = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError("bad CRC in chunk %r" % kind)
        chunks.append((kind, body))
        i += 12 + n
    if chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("chunks %s" % [c[0] for c in chunks])
    w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (depth, colour, interlace) != (8, 2, 0):
        raise ValueError("IHDR depth %d colour %d interlace %d" % (depth, colour, interlace))
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    stride, bpp = w * 3, 3
    if len(raw) != h * (stride + 1):
        raise ValueError("inflated %d bytes for %dx%d" % (len(raw), w, h))
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif f != 0:
                raise ValueError("filter %d" % f)
        rows.append(line)
        prev = line
    return w, h, lambda x, y: tuple(rows[y][3 * x:3 * x + 3])


def moving_average(points):
    w = max(1, len(points) // 20)
    out = []
    for i, (s, _) in enumerate(points):
        window = [v for _, v in points[max(0, i - w + 1):i + 1]]
        out.append((s, sum(window) / len(window)))
    return out


def check(run, data, shift):
    w, h, pixel = decode(data)
    lines = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    dice = [(l["step"], l["val_dice"]) for l in lines if "val_dice" in l]
    loss = [(l["step"], l["loss"]) for l in lines if "loss" in l and "skipped" not in l]
    steps = [s for s, _ in dice + loss]
    left, right, top, bottom = 50, w - 50, 20, h - 30
    x0, x1 = min(steps), max(steps)
    x1 = x1 if x1 > x0 else x0 + 1
    lo, hi = min(v for _, v in loss), max(v for _, v in loss)
    span = hi - lo if hi > lo else max(abs(hi), 1) * 0.1
    lo, hi = lo - 0.05 * span, hi + 0.05 * span
    px = lambda s: math.floor(left + (s - x0) / (x1 - x0) * (right - left) + 0.5)
    bad = []
    for s, v in dice:
        x, y = px(s), math.floor(bottom - (v + shift) * (bottom - top) + 0.5)
        if not 0 <= y < h or pixel(x - 2, y) != DICE:
            bad.append("Dice dot of step %d" % s)
    for s, v in moving_average(loss):
        v += shift * (hi - lo)
        x, y = px(s), math.floor(bottom - (v - lo) / (hi - lo) * (bottom - top) + 0.5)
        if x in (left, right):
            continue  # under the frame
        if not 0 <= y < h or pixel(x, y) not in (LOSS_AVG, DICE, DICE_EMA):
            bad.append("loss average at step %d" % s)
    if bad:
        raise ValueError("%d of %d points not drawn: %s" % (len(bad), len(dice) + len(loss), bad[:4]))
    return "%dx%d, %d validation dots and %d loss points where expected" % (w, h, len(dice), len(loss))


def main():
    run = sys.argv[1]
    data = open(os.path.join(run, "progress.png"), "rb").read()
    shift = 0.0
    if "--shift" in sys.argv:
        shift = float(sys.argv[sys.argv.index("--shift") + 1])
    if "--corrupt" in sys.argv:
        i = data.index(b"IDAT") + 40
        data = data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
    if "--blank" in sys.argv:
        w, h, _ = decode(data)
        raw = b"".join(b"\0" + b"\xff" * (3 * w) for _ in range(h))
        chunk = lambda k, b: struct.pack(">I", len(b)) + k + b + struct.pack(">I", zlib.crc32(k + b) & 0xFFFFFFFF)
        data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    try:
        print("progress.png: " + check(run, data, shift))
    except (ValueError, zlib.error) as e:
        print("progress.png: %s" % e)
        sys.exit(1)


if __name__ == "__main__":
    main()
