#!/usr/bin/env python3
"""trace_svg.py - render a seedpipe trace (--trace FILE.json) as an SVG timeline.

One row per process (the consumer first, then the workers), nested spans
stacked below their parent, one colour per span name, a time axis in
milliseconds and a legend. For docs/tracing.md's picture; Perfetto shows
the same file interactively.

  python3 bench/trace_svg.py TRACE.json OUT.svg [--from MS] [--to MS] [--width PX]
"""
import argparse
import html
import json

COLORS = {
    "sample": "#c9d6e8", "read": "#8c6bb1", "decode": "#2b8cbe", "augment": "#41ab5d",
    "write": "#fe9929", "wait work": "#d9d9d9", "wait slot": "#f768a1", "cache read": "#66c2a4",
    "cache write": "#238b45", "next": "#fdd0a2", "digest": "#e31a1c", "open": "#737373",
    "spawn": "#525252", "ring": "#a6761d", "publish": "#fb6a4a", "step": "#6a51a3", "batch": "#9ecae1",
    "user": "#bdbdbd",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from", dest="t0", type=float, default=None, help="ms")
    ap.add_argument("--to", dest="t1", type=float, default=None, help="ms")
    ap.add_argument("--width", type=int, default=1100)
    o = ap.parse_args()
    with open(o.trace) as f:
        d = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in d["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    spans = [e for e in d["traceEvents"] if e["ph"] == "X"]
    t0 = o.t0 * 1000 if o.t0 is not None else min(e["ts"] for e in spans)
    t1 = o.t1 * 1000 if o.t1 is not None else max(e["ts"] + e["dur"] for e in spans)
    spans = [e for e in spans if e["ts"] + e["dur"] >= t0 and e["ts"] <= t1]

    def order(pid):
        n = names.get(pid, "")
        return (0, 0) if n == "consumer" else (1, int(n.split()[1])) if n.startswith("worker ") \
            else (2, pid)

    pids = sorted(names, key=order)
    left, right, row_h, lane_h = 110, 20, 54, 12
    width = o.width
    scale = (width - left - right) / (t1 - t0)
    parts, y = [], 30
    for pid in pids:
        mine = sorted((e for e in spans if e["pid"] == pid), key=lambda e: (e["ts"], -e["dur"]))
        stack = []   # end times of the open spans: depth = nesting
        parts.append(f'<text x="6" y="{y + 16}" font-size="12">{html.escape(names[pid])}</text>')
        parts.append(f'<text x="6" y="{y + 30}" font-size="10" fill="#666">pid {pid}</text>')
        for e in mine:
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            depth = len(stack)
            stack.append(e["ts"] + e["dur"])
            a = max(e["ts"], t0)
            b = min(e["ts"] + e["dur"], t1)
            x, w = left + (a - t0) * scale, max((b - a) * scale, 0.4)
            c = COLORS.get(e["name"], "#bbbbbb")
            title = html.escape(f'{e["name"]} {e["dur"] / 1000:.3f} ms {e.get("args", {})}')
            parts.append(f'<rect x="{x:.2f}" y="{y + depth * lane_h}" width="{w:.2f}" '
                         f'height="{lane_h - 1}" fill="{c}"><title>{title}</title></rect>')
        y += row_h
    # axis
    step = 10 ** len(str(int((t1 - t0) / 1000 / 8))) / 10 or 1
    ms = (t0 // 1000 // step + 1) * step
    axis = []   # drawn first, under the spans
    while ms * 1000 <= t1:
        x = left + (ms * 1000 - t0) * scale
        axis.append(f'<line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{y}" stroke="#ddd"/>')
        axis.append(f'<text x="{x:.1f}" y="18" font-size="10" text-anchor="middle">'
                    f'{ms:g} ms</text>')
        ms += step
    parts = axis + parts
    used = sorted({e["name"] for e in spans if e["name"] in COLORS}, key=list(COLORS).index)
    lx = left
    for n in used:
        parts.append(f'<rect x="{lx}" y="{y + 8}" width="12" height="10" fill="{COLORS[n]}"/>')
        parts.append(f'<text x="{lx + 16}" y="{y + 17}" font-size="11">{n}</text>')
        lx += 30 + 7 * len(n)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 30}" '
           f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
           + "".join(parts) + "</svg>\n")
    with open(o.out, "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
