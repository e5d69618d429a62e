"""Checks a run's progress.png with the standard library only (validation.test):

- the PNG itself: signature, every chunk's CRC, IHDR (8-bit RGB, not interlaced), the
  IDAT stream inflated with zlib and unfiltered (filters 0-4) into pixels, IEND last;
- the curves: from RUN/metrics.jsonl and the layout docs/training.md gives (three panels,
  x from 100 to width-90; panel 1 y from 60 to 60+0.4 height, panel 2 from there + 70 for
  0.18 height, panel 3 from there + 70 to height-50; x from the first to the last step;
  each axis from the curve's lowest to its highest value with 5% margins, the Dice 0..1):
  each validation's dot is green, each point of the loss's moving average blue (or under a
  validation curve drawn over it), each step's time on its blue curve;
- the text: tick numbers left of each panel (at least two labels, apart), below it, right
  of panel 1 (the Dice axis); the axis labels ("step" below each panel, the y axis's left
  of it); the legend above panel 1: its four line samples in the curves' colours, each
  followed by text.

`check_progress_png.py RUN` prints "progress.png: ..." and exits 0 if all holds.
Negative controls, each must fail: `--shift D` moves the expected values by D (of the
Dice, or of each axis's span), `--corrupt` flips a byte of the image data in a copy,
`--blank` checks a white image of the same size, `--erase-text` paints the margins
outside the panels white (the curves and frames stay: a plot without text)."""
import json
import math
import os
import struct
import sys
import zlib

DICE, LOSS_AVG, DICE_EMA, TIME, LOSS = (44, 160, 44), (31, 119, 180), (255, 127, 14), (31, 119, 180), (170, 199, 232)


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


def rnd(v):
    return math.floor(v + 0.5)


def layout(w, h):
    """The panels' plot areas: (left, top, right, bottom) each (ProgressPlot.h)."""
    loss_bottom = 60 + rnd(0.4 * h)
    time_top = loss_bottom + 70
    time_bottom = time_top + rnd(0.18 * h)
    return {"loss": (100, 60, w - 90, loss_bottom), "time": (100, time_top, w - 90, time_bottom),
            "lr": (100, time_bottom + 70, w - 90, h - 50)}


def value_range(values):
    lo, hi = min(values), max(values)
    span = hi - lo if hi > lo else (abs(hi) * 0.1 if hi != 0 else 0.1)
    return lo - 0.05 * span, hi + 0.05 * span


def near(c, want, tol):
    return max(abs(a - b) for a, b in zip(c, want)) <= tol


def dark(c):
    return max(c) < 110


def runs(flags):
    """The number of runs of True in a list, and their extents."""
    out, start = [], None
    for i, f in enumerate(flags + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            out.append((start, i))
            start = None
    return out


def check_text(w, h, pixel, panels):
    bad = []

    def rows_with_ink(x0, x1, y0, y1):
        return [any(dark(pixel(x, y)) for x in range(max(0, x0), min(w, x1))) for y in range(max(0, y0), min(h, y1))]

    def cols_with_ink(x0, x1, y0, y1):
        return [any(dark(pixel(x, y)) for y in range(max(0, y0), min(h, y1))) for x in range(max(0, x0), min(w, x1))]

    for name, (left, top, right, bottom) in panels.items():
        # y tick numbers end 9 px left of the frame (the tick marks take the 5 px beside it).
        labels = runs(rows_with_ink(left - 24, left - 8, top - 8, bottom + 9))
        if len(labels) < 2:
            bad.append("%s: %d y tick labels left of the panel" % (name, len(labels)))
        labels = runs(cols_with_ink(left - 20, right + 20, bottom + 8, bottom + 24))
        if len(labels) < 2:
            bad.append("%s: %d x tick labels below the panel" % (name, len(labels)))
        if not any(cols_with_ink(left, right, bottom + 27, bottom + 46)):
            bad.append("%s: no x axis label below the tick labels" % name)
        if not any(rows_with_ink(8, 28, top, bottom)):
            bad.append("%s: no y axis label" % name)
    left, top, right, bottom = panels["loss"]
    labels = runs(rows_with_ink(right + 8, right + 24, top - 8, bottom + 9))
    if len(labels) < 2:
        bad.append("loss: %d Dice tick labels right of the panel" % len(labels))
    if not any(rows_with_ink(right + 58, right + 78, top, bottom)):
        bad.append("loss: no Dice axis label")
    # The legend: four line samples in the curves' colours on one row, text after each.
    y = top - 30
    row = [pixel(x, y) for x in range(w)]
    starts = []
    for colour in (LOSS, LOSS_AVG, DICE, DICE_EMA):
        xs = [x for x in range(left, w) if near(row[x], colour, 12) and x not in starts]
        if not xs:
            bad.append("legend: no sample line in %s" % (colour,))
            continue
        starts.append(xs[0])
    for i, x0 in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else w
        if not any(cols_with_ink(x0 + 26, end - 4, y - 8, y + 9)):
            bad.append("legend entry %d: no text after its line" % (i + 1))
    return bad


def check(run, data, shift):
    w, h, pixel = decode(data)
    lines = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    dice = [(l["step"], l["val_dice"]) for l in lines if "val_dice" in l]
    steps_lines = [l for l in lines if "loss" in l and "skipped" not in l]
    loss = [(l["step"], l["loss"]) for l in steps_lines]
    times = [(l["step"], l["step_time"]) for l in steps_lines]
    steps = [s for s, _ in dice + loss]
    panels = layout(w, h)
    left, top, right, bottom = panels["loss"]
    x0, x1 = min(steps), max(steps)
    x1 = x1 if x1 > x0 else x0 + 1
    px = lambda s: rnd(left + (s - x0) / (x1 - x0) * (right - left))
    lo, hi = value_range([v for _, v in loss])
    bad = []
    for s, v in dice:
        x, y = px(s), rnd(bottom - (v + shift) * (bottom - top))
        if not 0 <= y < h or pixel(x - 2, y) != DICE:
            bad.append("Dice dot of step %d" % s)
    for s, v in moving_average(loss):
        v += shift * (hi - lo)
        x, y = px(s), rnd(bottom - (v - lo) / (hi - lo) * (bottom - top))
        if x in (left, right):
            continue  # under the frame
        if not 0 < y < h - 1 or not (any(near(pixel(x, y + d), LOSS_AVG, 30) for d in (-1, 0, 1)) or
                                     near(pixel(x, y), DICE, 60) or near(pixel(x, y), DICE_EMA, 60)):
            bad.append("loss average at step %d" % s)
    _, ttop, _, tbottom = panels["time"]
    tlo, thi = value_range([v for _, v in times])
    for s, v in times:
        v += shift * (thi - tlo)
        x, y = px(s), rnd(tbottom - (v - tlo) / (thi - tlo) * (tbottom - ttop))
        if x in (left, right):
            continue
        if not 0 < y < h - 1 or not any(near(pixel(x, y + d), TIME, 40) for d in (-1, 0, 1)):
            bad.append("step time at step %d" % s)
    if bad:
        raise ValueError("%d of %d points not drawn: %s" % (len(bad), len(dice) + 2 * len(loss), bad[:4]))
    bad = check_text(w, h, pixel, panels)
    if bad:
        raise ValueError("text missing: %s" % "; ".join(bad[:4]))
    return ("%dx%d, %d validation dots, %d loss and step time points where expected; tick labels, "
            "axis labels and the legend drawn" % (w, h, len(dice), len(loss)))


def encode(w, h, pixel):
    raw = b"".join(b"\0" + bytes(v for x in range(w) for v in pixel(x, y)) for y in range(h))
    chunk = lambda k, b: struct.pack(">I", len(b)) + k + b + struct.pack(">I", zlib.crc32(k + b) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def erase_text(data):
    """The image with everything outside the panels' frames (and their 5 px tick marks)
    white: the plot as it would be without text."""
    w, h, pixel = decode(data)
    panels = layout(w, h).values()

    def kept(x, y):
        return any(l - 5 <= x <= r + 5 and t - 5 <= y <= b + 5 for l, t, r, b in panels)
    return encode(w, h, lambda x, y: pixel(x, y) if kept(x, y) else (255, 255, 255))


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
    if "--erase-text" in sys.argv:
        data = erase_text(data)
    try:
        print("progress.png: " + check(run, data, shift))
    except (ValueError, zlib.error) as e:
        print("progress.png: %s" % e)
        sys.exit(1)


if __name__ == "__main__":
    main()
