"""targets_ref.py - a plain reference for boxes and keypoints through a
pipeline, written from docs/pipeline.md "Targets" (not from the C code):
the geometric steps are read from `explain` (the parameters each op drew),
each coordinate is a Python float (IEEE double) mapped step by step in the
documented order, and rounded to float32 once at the end. Not a test
itself (test_targets.py uses it).
"""
import math
import re

import numpy as np


def sincos_deg(r):
    """(sin, cos) of r degrees, docs/pipeline.md "rotate": the angle reduced
    by quarter turns, the Taylor polynomials to t^21 / t^20 in Horner form."""
    q = math.floor(r / 90.0 + 0.5)
    rem = r - 90.0 * q
    t = rem * (3.14159265358979323846 / 180.0)
    t2, ps, pc = t * t, 0.0, 0.0
    for k in range(10, 0, -1):
        ps = -(1.0 + ps) * t2 / ((2.0 * k) * (2.0 * k + 1.0))
        pc = -(1.0 + pc) * t2 / ((2.0 * k - 1.0) * (2.0 * k))
    s, c = t * (1.0 + ps), 1.0 + pc
    for _ in range(int(q - 4.0 * math.floor(q / 4.0))):
        s, c = c, -s
    return s, c


def rotation_cs(angle32):
    """rotate's (theta[0], theta[1]) for a float32 angle, rounded to float32."""
    s, c = sincos_deg(-float(angle32))
    return float(np.float32(c)), float(np.float32(s))


def affine_rss(angle, shx, shy):
    """[a, b, c, d] of docs/pipeline.md "affine" (seedpipe's sine and cosine)."""
    sr, cr = sincos_deg(angle)
    sd, cd = sincos_deg(angle - shy)
    sy, cy_ = sincos_deg(shy)
    sx, cx_ = sincos_deg(shx)
    t = sx / cx_
    return [cd / cy_, -cd * t / cy_ - sr, sd / cy_, -sd * t / cy_ + cr]


def affine_theta(rss, scale, cx, cy, tx, ty):
    """The image's binary32 inverse matrix (docs/pipeline.md "affine"
    theta: torchvision's _get_inverse_affine_matrix in double, then float32;
    (cx, cy) relative to the image centre), which masks are sampled through."""
    a, b, c, d = rss
    m = [v / scale for v in (d, -b, 0.0, -c, a, 0.0)]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty)
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty)
    m[2] += cx
    m[5] += cy
    return [float(np.float32(v)) for v in m]


def affine_forward(angle, shx, shy, scale, cx, cy, tx, ty):
    """docs/pipeline.md "Targets": torchvision's forward matrix
    (_get_inverse_affine_matrix, inverted=False) in double."""
    a, b, c, d = affine_rss(angle, shx, shy)
    m = [a * scale, b * scale, 0.0 * scale, c * scale, d * scale, 0.0 * scale]
    m[2] += m[0] * -cx + m[1] * -cy
    m[5] += m[3] * -cx + m[4] * -cy
    m[2] += cx + tx
    m[5] += cy + ty
    return m


def policy_step(name, mag, W, H):
    """The step of a policy sub-op (name, magnitude as explain prints it),
    or None when it keeps pixels in place."""
    if name == "Rotate":
        return ("rotate", rotation_cs(np.float32(mag)), W, H, W, H)
    rss, cx, cy, tx, ty = [1.0, -0.0, 0.0, 1.0], W * 0.5, H * 0.5, 0.0, 0.0
    if name == "ShearX":
        rss[1], cx, cy = -mag, 0.0, 0.0
    elif name == "ShearY":
        rss[2], cx, cy = -mag, 0.0, 0.0
    elif name == "TranslateX":
        tx = float(int(mag))
    elif name == "TranslateY":
        ty = float(int(mag))
    else:
        return None
    a, b, c, d = rss
    m = [a, b, 0.0, c, d, 0.0]
    m[2] += m[0] * -cx + m[1] * -cy
    m[5] += m[3] * -cx + m[4] * -cy
    m[2] += cx + tx
    m[5] += cy + ty
    # the image's theta: shears about the top-left corner, i.e. (-W/2, -H/2)
    # from the centre; translations about the centre
    shear = name in ("ShearX", "ShearY")
    th = affine_theta(rss, 1.0, 0.0 - W * 0.5 if shear else 0.0,
                      0.0 - H * 0.5 if shear else 0.0, tx, ty)
    return ("affine", m + th, W, H, W, H)


def steps_from_explain(text, W, H):
    """[(kind, params, in_w, in_h, out_w, out_h)] of explain's op lines for
    a W x H source (an affine step's params: the forward matrix m0..m5, then
    the image's binary32 theta, for masks)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\d+ random_resized_crop: box x=(\d+) y=(\d+) w=(\d+) h=(\d+) of "
                     r"(\d+)x(\d+) -> (\d+)x(\d+)", line)
        if m:
            x, y, w, h, _, _, ow, oh = map(int, m.groups())
            out.append(("axis", (x, y, ow / w, oh / h), W, H, ow, oh))
            W, H = ow, oh
            continue
        m = re.match(r"\d+ resize: (\d+)x(\d+) -> (\d+)x(\d+)", line)
        if m:
            _, _, ow, oh = map(int, m.groups())
            out.append(("axis", (0, 0, ow / W, oh / H), W, H, ow, oh))
            W, H = ow, oh
            continue
        m = re.match(r"\d+ center_crop: (offset x=(-?\d+)|pad x=(\d+),\d+) "
                     r"(offset y=(-?\d+)|pad y=(\d+),\d+) of \d+x\d+ -> (\d+)x(\d+)", line)
        if m:
            x0 = int(m.group(2)) if m.group(2) is not None else -int(m.group(3))
            y0 = int(m.group(5)) if m.group(5) is not None else -int(m.group(6))
            ow, oh = int(m.group(7)), int(m.group(8))
            out.append(("axis", (x0, y0, 1.0, 1.0), W, H, ow, oh))
            W, H = ow, oh
            continue
        m = re.match(r"\d+ random_crop: offset x=(\d+) y=(\d+) of \d+x\d+ \(\d+x\d+ padded "
                     r"(\d+),(\d+),\d+,\d+ \w+, then (\d+),(\d+) each side\) -> (\d+)x(\d+)", line)
        if m:
            x, y, pl, pt, ex, ey, ow, oh = map(int, m.groups())
            out.append(("axis", (x - pl - ex, y - pt - ey, 1.0, 1.0), W, H, ow, oh))
            W, H = ow, oh
            continue
        m = re.match(r"\d+ random_zoom_out: canvas (\d+)x(\d+), image at x=(\d+) y=(\d+) of",
                     line)
        if m:
            cw, ch, left, top = map(int, m.groups())
            out.append(("axis", (-left, -top, 1.0, 1.0), W, H, cw, ch))
            W, H = cw, ch
            continue
        m = re.match(r"\s+attempt \d+ option \S+: trial \d+: crop x=(\d+) y=(\d+) w=(\d+) "
                     r"h=(\d+) of", line)
        if m:
            x, y, w, h = map(int, m.groups())
            out.append(("axis", (x, y, 1.0, 1.0), W, H, w, h))
            W, H = w, h
            continue
        m = re.match(r"\d+ (hflip|vflip): flipped", line)
        if m:
            out.append((m.group(1), (), W, H, W, H))
            continue
        m = re.match(r"\d+ rotate: angle (\S+)", line)
        if m:
            out.append(("rotate", rotation_cs(np.float32(m.group(1))), W, H, W, H))
            continue
        m = re.match(r"\d+ affine: angle (\S+) translate (-?\d+),(-?\d+) scale (\S+) "
                     r"shear (\S+),(\S+)", line)
        if m:
            f = [float(np.float32(v)) for v in m.groups()]
            th = affine_theta(affine_rss(f[0], f[4], f[5]), f[3], 0.0, 0.0, f[1], f[2])
            out.append(("affine", affine_forward(f[0], f[4], f[5], f[3], W * 0.5, H * 0.5,
                                                 f[1], f[2]) + th, W, H, W, H))
            continue
        m = re.match(r"\d+ (auto_augment|rand_augment|trivial_augment_wide): \[([^\]]*)\]",
                     line)
        if m and m.group(2):
            for sub in m.group(2).split(", "):
                name, mag = sub.split(" ")
                st = policy_step(name, float(np.float32(mag)), W, H)
                if st:
                    out.append(st)
    return out


def map_point(step, x, y):
    kind, p, W, H = step[:4]
    if kind == "axis":
        return (x - p[0]) * p[2], (y - p[1]) * p[3]
    if kind == "hflip":
        return float(W) - x, y
    if kind == "vflip":
        return x, float(H) - y
    if kind == "affine":
        return (p[0] * x + p[1] * y) + p[2], (p[3] * x + p[4] * y) + p[5]
    c, s = p
    cx, cy = float(W) * 0.5, float(H) * 0.5
    dx, dy = x - cx, y - cy
    return (c * dx - s * dy) + cx, (s * dx + c * dy) + cy


def mirrors(step):
    """Does the step reverse the canvas's orientation (docs/pipeline.md
    "Moving keypoints": then the flip pairs swap)?"""
    kind, p = step[:2]
    if kind in ("hflip", "vflip"):
        return True
    if kind == "affine":
        return p[0] * p[4] - p[1] * p[3] < 0.0
    return kind == "axis" and p[2] * p[3] < 0.0


def map_rect(step, r):
    pts = [map_point(step, x, y) for x, y in ((r[0], r[1]), (r[2], r[1]), (r[2], r[3]),
                                              (r[0], r[3]))]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    return [min(xs), min(ys), max(xs), max(ys)]


def clip(r, W, H):
    r = [max(r[0], 0.0), max(r[1], 0.0), min(r[2], float(W)), min(r[3], float(H))]
    return r, r[2] > r[0] and r[3] > r[1]


def inside(x, y, W, H):
    return 0.0 <= x <= W and 0.0 <= y <= H


def apply(steps, src_w, src_h, boxes, labels, kps, rules):
    """(boxes (n,4) f32, labels, keypoints (n,K,3) f32, counts [kept,
    empty, area, visibility], fates) for one sample; rules: dict of the
    targets op (max_boxes, clip, min_area, min_visibility, keypoints, and
    flip_pairs: [(a, b)], swapped after every mirroring step)."""
    K = rules["keypoints"]
    kept_b, kept_l, kept_k, counts, fates = [], [], [], [0, 0, 0, 0], []
    for i, b in enumerate(boxes):
        whole, alive = clip([float(np.float32(v)) for v in b], src_w, src_h)
        vis = list(whole)
        kp = [[float(np.float32(v)) for v in kps[i][j]] if kps is not None else [0.0] * 3
              for j in range(K)]
        for p in kp:
            if not inside(p[0], p[1], src_w, src_h):
                p[2] = 0.0
        for st in steps:
            whole = map_rect(st, whole)
            if alive:
                vis, alive = clip(map_rect(st, vis), st[4], st[5])
            for p in kp:
                p[0], p[1] = map_point(st, p[0], p[1])
                if not inside(p[0], p[1], st[4], st[5]):
                    p[2] = 0.0
            if mirrors(st):
                for a, b in rules.get("flip_pairs", []):
                    kp[a], kp[b] = kp[b], kp[a]
        area = (vis[2] - vis[0]) * (vis[3] - vis[1]) if alive else 0.0
        wa = (whole[2] - whole[0]) * (whole[3] - whole[1])
        visible = area / wa if alive else 0.0
        if not alive:
            fate = 1
        elif area < rules["min_area"]:
            fate = 2
        elif visible < rules["min_visibility"]:
            fate = 3
        else:
            fate = 0
        counts[fate] += 1
        fates.append((fate, area, visible))
        if fate == 0:
            kept_b.append(vis if rules["clip"] else whole)
            kept_l.append(labels[i])
            kept_k.append(kp)
    N = rules["max_boxes"]
    ob = np.zeros((N, 4), np.float32)
    ol = np.zeros(N, np.int32)
    ok = np.zeros((N, K, 3), np.float32)
    for j, (b, l, k) in enumerate(zip(kept_b, kept_l, kept_k)):
        ob[j] = np.array(b, np.float64).astype(np.float32)
        ol[j] = l
        if K:
            ok[j] = np.array(k, np.float64).astype(np.float32)
    return ob, ol, ok, counts, fates


# ---- random_zoom_out and random_iou_crop (docs/pipeline.md), from the draws ----

F32 = np.float32


def zoom_draw(block, W, H, lo, hi, p):
    """(applied, canvas w, canvas h, left, top) from block 0's four words
    (u01 of each; binary32 arithmetic as documented)."""
    u = [(x >> 8) * 2.0 ** -24 for x in block]
    r = F32(lo) + F32(hi - lo) * F32(u[1])
    cw, ch = int(F32(W) * r), int(F32(H) * r)
    left, top = int(F32(cw - W) * F32(u[2])), int(F32(ch - H) * F32(u[3]))
    return u[0] < p, cw, ch, left, top


def visible_at(steps, src_w, src_h, boxes):
    """Each box's visible rectangle after `steps` (None: empty)."""
    out = []
    for b in boxes:
        v, alive = clip([float(F32(x)) for x in b], src_w, src_h)
        for st in steps:
            if not alive:
                break
            v, alive = clip(map_rect(st, v), st[4], st[5])
        out.append(v if alive else None)
    return out


def iou_trial(words, W, H, vis, prm, thr):
    """One trial: ("empty"|"aspect"|"centre"|"iou", None) or ("ok", (x, y,
    w, h, centred, best))."""
    u = [F32((x >> 8) * 2.0 ** -24) for x in words]
    lo, span = F32(prm["min_scale"]), F32(prm["max_scale"] - prm["min_scale"])
    w, h = int(F32(W) * (lo + span * u[0])), int(F32(H) * (lo + span * u[1]))
    if w <= 0 or h <= 0:
        return "empty", None
    if not prm["min_aspect_ratio"] <= w / h <= prm["max_aspect_ratio"]:
        return "aspect", None
    x, y = int(F32(W - w) * u[2]), int(F32(H - h) * u[3])
    best, centred = -1.0, 0
    for b in vis:
        if b is None:
            continue
        mx, my = 0.5 * (b[0] + b[2]), 0.5 * (b[1] + b[3])
        if not (x < mx < x + w and y < my < y + h):
            continue
        centred += 1
        iw = min(b[2], x + w) - max(b[0], x)
        ih = min(b[3], y + h) - max(b[1], y)
        inter = iw * ih if iw > 0 and ih > 0 else 0.0
        best = max(best, inter / (((b[2] - b[0]) * (b[3] - b[1]) + float(w) * h) - inter))
    if not centred:
        return "centre", None
    if best < thr:
        return "iou", None
    return "ok", (x, y, w, h, centred, best)


def iou_decide(draw, W, H, vis, prm):
    """random_iou_crop as docs/pipeline.md states it; draw(block) gives the
    four words of a block of this op. Returns (kind, attempt, option,
    detail): ("crop", a, thr, (x, y, w, h, centred, best, trial)),
    ("keep", a, thr, None) or ("fallback", attempts, None, None)."""
    opts = prm["sampler_options"]
    for a in range(prm["attempts"]):
        thr = opts[(draw(a << 16)[0] * len(opts)) >> 32]
        if thr >= 1.0:
            return "keep", a, thr, None
        for t in range(prm["trials"]):
            why, res = iou_trial(draw((a << 16) | (t + 1)), W, H, vis, prm, thr)
            if why == "ok":
                return "crop", a, thr, res + (t,)
    return "fallback", prm["attempts"], None, None


# ---- protect= of the targets op (docs/pipeline.md "protect") ----

def fate(steps, src_w, src_h, box, rules):
    """The rules' verdict on one box after `steps`: 0 kept, 1 empty,
    2 min_area, 3 min_visibility (as apply() judges at the end)."""
    whole, alive = clip([float(F32(v)) for v in box], src_w, src_h)
    vis = list(whole)
    for st in steps:
        whole = map_rect(st, whole)
        if alive:
            vis, alive = clip(map_rect(st, vis), st[4], st[5])
    if not alive:
        return 1
    area = (vis[2] - vis[0]) * (vis[3] - vis[1])
    if area < rules["min_area"]:
        return 2
    if area / ((whole[2] - whole[0]) * (whole[3] - whole[1])) < rules["min_visibility"]:
        return 3
    return 0


def rrc_at(words_of, base, W, H, scale, ratio, det):
    """random_resized_crop's box (x, y, w, h) with try t drawing block
    base | t (docs/pipeline.md random_resized_crop; det: detmath_ref)."""
    area = float(H) * float(W)
    lr0, lr1 = det.det_log(ratio[0]), det.det_log(ratio[1])
    for t in range(10):
        c = words_of(base | t)
        target = area * (scale[0] + (scale[1] - scale[0]) * ((c[0] >> 8) * 2.0 ** -24))
        aspect = det.det_exp(lr0 + (lr1 - lr0) * ((c[1] >> 8) * 2.0 ** -24))
        w = det.round_half_even(math.sqrt(target * aspect))
        h = det.round_half_even(math.sqrt(target / aspect))
        if 0 < w <= W and 0 < h <= H:
            w, h = int(w), int(h)
            return ((c[3] * (W - w + 1)) >> 32, (c[2] * (H - h + 1)) >> 32, w, h)
    r = W / H
    w, h = W, H
    if r < ratio[0]:
        h = int(det.round_half_even(w / ratio[0]))
    elif r > ratio[1]:
        w = int(det.round_half_even(h * ratio[1]))
    w, h = min(max(w, 1), W), min(max(h, 1), H)
    return ((W - w) // 2, (H - h) // 2, w, h)


def protect_decide(candidate, before, src_w, src_h, boxes, rules, redraws):
    """protect=R: candidate(a) gives attempt a's (position, step); the boxes
    the rules keep after `before` are protected. Returns (chosen attempt,
    [(a, position, lost, first lost box, its fate)], fallback?)."""
    keep = [i for i, b in enumerate(boxes) if fate(before, src_w, src_h, b, rules) == 0]
    tries = []
    if not boxes:
        return 0, tries, False
    for a in range(redraws + 1):
        pos, step = candidate(a)
        lost = [(i, f) for i in keep
                for f in [fate(before + [step], src_w, src_h, boxes[i], rules)] if f]
        tries.append((a, pos, len(lost), lost[0][0] if lost else -1, lost[0][1] if lost else 0))
        if not lost:
            return a, tries, False
    return 0, tries, True
