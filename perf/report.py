#!/usr/bin/env python3
"""Turn perf/results/runs.csv (written by perf/run.sh) into results.md and chart.svg.

Usage: perf/report.py [runs.csv] [out_dir]
Medians are over the runs whose produce phase succeeded (status ok, or only the consume/e2e
phase failed; such runs are listed under "Failed runs") for each target x config. The summary line gives
Kelp/Kafka ratios (geometric mean over the configs both ran) for producer MB/s, broker CPU
seconds per GB produced and producer p99 latency.
"""
import csv
import math
import os
import statistics
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "runs.csv")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(CSV)

TARGET_ORDER = ["kelp-memory", "kelp-memory-base", "kelp-memory-shards", "kelp-local",
                "kelp-local-base", "kelp-local-shards",
                "kelp-seaweedmq", "kelp-seaweedmq-base", "kafka", "seaweed"]
TARGET_LABEL = {
    "kelp-memory": "Kelp (memory)",
    "kelp-memory-base": "Kelp base build (memory)",
    "kelp-local-base": "Kelp base build (local, fsync=always)",
    "kelp-seaweedmq-base": "Kelp base build (SeaweedMQ)",
    "kelp-memory-shards": "Kelp (memory, --advertise-shards)",
    "kelp-local": "Kelp (local, fsync=always)",
    "kelp-local-shards": "Kelp (local, fsync=always, --advertise-shards)",
    "kafka": "Apache Kafka 4.1.1",
    "seaweed": "SeaweedFS 4.48 gateway",
}
COLORS = {"kelp-seaweedmq-base": "#b8c4e0", "kelp-memory-base": "#99d5cd", "kelp-local-base": "#c6dcbc", "kelp-memory": "#2a9d8f", "kelp-memory-shards": "#1d6f65", "kelp-local": "#8ab17d",
          "kelp-local-shards": "#5c7d4f", "kafka": "#e76f51", "seaweed": "#6d597a"}

METRICS = [  # column, header, format
    ("producer_mb_per_s", "MB/s", "{:.1f}"),
    ("producer_records_per_s", "rec/s", "{:,.0f}"),
    ("lat_avg_ms", "avg ms", "{:.1f}"),
    ("lat_p50_ms", "p50 ms", "{:.0f}"),
    ("lat_p99_ms", "p99 ms", "{:.0f}"),
    ("lat_p999_ms", "p99.9 ms", "{:.0f}"),
    ("broker_cpu_s_per_gb", "CPU-s/GB", "{:.2f}"),
    ("consumer_fetch_mb_per_s", "consume MB/s", "{:.1f}"),
    ("e2e_p50_ms", "e2e p50 ms", "{:.0f}"),
    ("e2e_p99_ms", "e2e p99 ms", "{:.0f}"),
    ("peak_rss_mb", "peak RSS MB", "{:.0f}"),
]


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def config_key(r):
    return (r["acks"], int(r["record_size"]), int(r["partitions"]))


def config_label(c):
    return f"acks={c[0]} {c[1]}B {c[2]}p"


def config_sort(c):
    return (c[0] != "1", c[1], c[2])


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    with open(CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{CSV}: no runs")
    groups = defaultdict(list)
    failed = defaultdict(list)
    # status: ok, or the phase that failed (create-topics, produce, consume, e2e, broker-died).
    # Producer numbers count when produce succeeded; consumer numbers when consume did too.
    for r in rows:
        key = (r["target"], config_key(r))
        if r["status"] in ("ok", "consume", "e2e"):
            if r["status"] == "consume":
                for col in ("consumer_mb_per_s", "consumer_records_per_s", "consumer_fetch_mb_per_s"):
                    r[col] = ""
            groups[key].append(r)
        if r["status"] != "ok":
            failed[key].append(r)
    targets = [t for t in TARGET_ORDER if any(k[0] == t for k in list(groups) + list(failed))]
    targets += sorted({k[0] for k in list(groups) + list(failed)} - set(targets))
    configs = sorted({k[1] for k in list(groups) + list(failed)}, key=config_sort)

    med = {}
    for key, rs in groups.items():
        med[key] = {}
        for col, _, _ in METRICS:
            vals = [num(r[col]) for r in rs if num(r[col]) is not None]
            med[key][col] = statistics.median(vals) if vals else None
        med[key]["n"] = len(rs)
        med[key]["records"] = rs[0]["records"]

    def ratios(a, b="kafka"):
        out = {}
        for col in ("producer_mb_per_s", "broker_cpu_s_per_gb", "lat_p99_ms", "consumer_fetch_mb_per_s", "peak_rss_mb"):
            per = []
            for c in configs:
                x, y = med.get((a, c), {}).get(col), med.get((b, c), {}).get(col)
                if x is not None and y:
                    per.append(max(x, 0.5 if col == "lat_p99_ms" else 1e-9) / y)
            out[col] = gmean(per)
        return out

    loads = [num(r["load1_before"]) for r in rows if num(r["load1_before"]) is not None]
    info = ""
    info_path = os.path.join(os.path.dirname(CSV), "run-info.txt")
    if os.path.exists(info_path):
        info = open(info_path).read().strip()

    lines = ["# Kelp perf results", ""]
    summary = []
    for t in targets:
        if t.startswith("kelp") and "kafka" in targets:
            r = ratios(t)
            if r["producer_mb_per_s"]:
                summary.append(
                    f"**{TARGET_LABEL.get(t, t)} / Apache Kafka** (geometric mean over configs): "
                    f"MB/s **{r['producer_mb_per_s']:.2f}x**, CPU-s per GB **{r['broker_cpu_s_per_gb']:.2f}x**, "
                    f"p99 produce latency **{r['lat_p99_ms']:.2f}x**"
                    + (f", consume MB/s {r['consumer_fetch_mb_per_s']:.2f}x" if r["consumer_fetch_mb_per_s"] else "")
                    + (f", peak RSS {r['peak_rss_mb']:.2f}x" if r["peak_rss_mb"] else "")
                )
    for t in targets:
        base = t + "-base"
        if base in targets:
            r = ratios(t, base)
            if r["producer_mb_per_s"]:
                summary.append(
                    f"**{TARGET_LABEL.get(t, t)} / its base build** (same run): "
                    f"MB/s **{r['producer_mb_per_s']:.2f}x**, CPU-s per GB **{r['broker_cpu_s_per_gb']:.2f}x**, "
                    f"p99 produce latency **{r['lat_p99_ms']:.2f}x**"
                    + (f", consume MB/s {r['consumer_fetch_mb_per_s']:.2f}x" if r["consumer_fetch_mb_per_s"] else "")
                    + (f", peak RSS {r['peak_rss_mb']:.2f}x" if r["peak_rss_mb"] else "")
                )
    if "seaweed" in targets and "kafka" in targets:
        r = ratios("seaweed")
        if r["producer_mb_per_s"]:
            summary.append(
                f"SeaweedFS gateway / Apache Kafka: MB/s {r['producer_mb_per_s']:.2f}x, "
                f"CPU-s per GB {r['broker_cpu_s_per_gb']:.2f}x, p99 {r['lat_p99_ms']:.2f}x"
            )
    if "seaweed" in targets:
        # Only the configs the gateway ran in (by default 1 KiB, repetition 1).
        for t in targets:
            if t.startswith("kelp"):
                r = ratios(t, "seaweed")
                if r["producer_mb_per_s"]:
                    summary.append(
                        f"**{TARGET_LABEL.get(t, t)} / SeaweedFS gateway** (configs both ran): "
                        f"MB/s **{r['producer_mb_per_s']:.1f}x**, CPU-s per GB **{r['broker_cpu_s_per_gb']:.3f}x**, "
                        f"p99 produce latency **{r['lat_p99_ms']:.3f}x**"
                    )
    lines += ["Summary: " + s for s in summary] + [""]
    lines += [
        "Tools: Apache Kafka 4.1.1 `ProducerPerformance` (`--throughput -1`, linger.ms=5, batch.size=131072),"
        " `ConsumerPerformance` (reads back what was produced; fetch MB/s excludes the group join) and"
        " `EndToEndLatency` (1-partition topic, one record at a time). Broker and tools share the same 2 cores."
        " CPU-s/GB = broker utime+stime during the produce phase / GB produced. Peak RSS = VmHWM of the broker"
        " process (sum of all processes for SeaweedFS). Each run uses a freshly started broker with an empty"
        " data dir. Kelp memory keeps everything in RAM (no disk); Kafka writes to its log dir (page cache, no fsync)"
        " — that compares serving paths; Kelp local (`--storage local`, default `--fsync always`) writes segment"
        " files (page cache) and fdatasyncs before answering acks=all, which is stricter than Kafka's default.",
        "",
        f"Load (1-min loadavg before each run): min {min(loads):.2f}, median {statistics.median(loads):.2f},"
        f" max {max(loads):.2f} (the broker and the Java tools alone make about 2 on these 2 cores)." if loads else "",
        "",
    ]
    if info:
        lines += ["```", info, "```", ""]
    notes_path = os.path.join(OUT, "notes.md")
    if os.path.exists(notes_path):
        lines += [open(notes_path).read().strip(), ""]
    lines += ["## Medians", ""]
    hdr = ["config", "target", "n"] + [h for _, h, _ in METRICS]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "|".join(["---"] * 2 + ["--:"] * (len(hdr) - 2)) + "|")
    for c in configs:
        for t in targets:
            m = med.get((t, c))
            nf = len(failed.get((t, c), []))
            if not m and not nf:
                continue
            cells = [config_label(c), TARGET_LABEL.get(t, t), f"{m['n'] if m else 0}" + (f" ({nf} with a failed phase)" if nf else "")]
            for col, _, fmt in METRICS:
                v = m.get(col) if m else None
                cells.append(fmt.format(v) if v is not None else "–")
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    recs = sorted({(r["target"], r["record_size"], r["records"]) for r in rows})
    lines.append("Records per produce run: " + ", ".join(f"{t} {s} B: {int(n):,}" for t, s, n in recs) + ".")
    lines.append("")
    if failed:
        lines += ["## Failed runs", "", "| run | target | config | status | error |", "|---|---|---|---|---|"]
        for (t, c), rs in sorted(failed.items(), key=lambda kv: (kv[0][0], config_sort(kv[0][1]))):
            for r in rs:
                lines.append(f"| {r['rep']} | {t} | {config_label(c)} | {r['status']} | {r['error'].replace('|', '/')} |")
        lines.append("")
    lines += ["Raw per-run data: `runs.csv`; chart: `chart.svg`. Regenerate with `python3 perf/report.py`.", ""]
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write("\n".join(lines))

    write_svg(os.path.join(OUT, "chart.svg"), targets, configs, med, summary)
    for s in summary:
        print(s.replace("**", ""))


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_svg(path, targets, configs, med, summary):
    panels = [
        ("producer_mb_per_s", "Producer throughput (MB/s, higher is better)"),
        ("broker_cpu_s_per_gb", "Broker CPU seconds per GB produced (lower is better)"),
        ("lat_p99_ms", "Producer p99 latency (ms, lower is better)"),
    ]
    W, PH, top, left, right = 980, 230, 96, 70, 20
    H = top + len(panels) * (PH + 50) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="Helvetica, Arial, sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           '<text x="20" y="24" font-size="16" font-weight="bold">Kelp vs Apache Kafka: kafka-producer-perf-test medians</text>']
    for i, s in enumerate(summary[:2]):
        out.append(f'<text x="20" y="{42 + 14 * i}" fill="#333">{esc(s.replace("**", ""))}</text>')
    # legend
    lx = left
    for t in targets:
        label = TARGET_LABEL.get(t, t)
        out.append(f'<rect x="{lx}" y="{top - 24}" width="10" height="10" fill="{COLORS.get(t, "#888")}"/>')
        out.append(f'<text x="{lx + 14}" y="{top - 15}">{esc(label)}</text>')
        lx += 14 + 7 * len(label) + 24
    pw = W - left - right
    gw = pw / max(1, len(configs))
    bw = min(28, (gw - 16) / max(1, len(targets)))
    for p, (col, title) in enumerate(panels):
        y0 = top + 20 + p * (PH + 50)
        vals = [med[(t, c)][col] for t in targets for c in configs if (t, c) in med and med[(t, c)][col] is not None]
        vmax = max(vals) if vals else 1
        vmax = vmax * 1.12 or 1
        out.append(f'<text x="{left}" y="{y0 - 6}" font-size="13" font-weight="bold">{esc(title)}</text>')
        for k in range(5):
            v = vmax * k / 4
            yy = y0 + PH - PH * k / 4
            out.append(f'<line x1="{left}" x2="{W - right}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" fill="#555">{v:.3g}</text>')
        for ci, c in enumerate(configs):
            gx = left + ci * gw + (gw - bw * len(targets)) / 2
            for ti, t in enumerate(targets):
                v = med.get((t, c), {}).get(col)
                x = gx + ti * bw
                if v is None:
                    out.append(f'<text x="{x + bw / 2:.1f}" y="{y0 + PH - 4}" text-anchor="middle" fill="#999">n/a</text>')
                    continue
                h = PH * v / vmax
                out.append(f'<rect x="{x:.1f}" y="{y0 + PH - h:.1f}" width="{bw - 3:.1f}" height="{h:.1f}" '
                           f'fill="{COLORS.get(t, "#888")}"><title>{esc(TARGET_LABEL.get(t, t))} {esc(config_label(c))}: {v:.3g}</title></rect>')
                out.append(f'<text x="{x + (bw - 3) / 2:.1f}" y="{y0 + PH - h - 3:.1f}" text-anchor="middle" font-size="9" fill="#333">{v:.3g}</text>')
            out.append(f'<text x="{left + ci * gw + gw / 2:.1f}" y="{y0 + PH + 14}" text-anchor="middle">{esc(config_label(c))}</text>')
        out.append(f'<line x1="{left}" x2="{W - right}" y1="{y0 + PH}" y2="{y0 + PH}" stroke="#333"/>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
