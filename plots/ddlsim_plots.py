#!/usr/bin/python3
"""Figures from ddlsim's result files: step-time breakdowns, scaling, memory, pipeline
timelines, link heatmaps, search convergence, accuracy and sensitivity (tornado) plots.

Each sub-command reads one kind of file that ddlsim writes and saves one figure as PDF,
PNG and SVG (--out PREFIX, --formats). A missing or malformed input file stops with one
line on stderr, "ddlsim-plots: FILE: what is wrong", and exit status 2; an output file
that cannot be written, with exit status 1. See README.md in this folder.
"""

import argparse
import csv
import io
import json
import math
import os
import re
import sys
import textwrap

import numpy as np
from matplotlib.colors import Normalize
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import (EngFormatter, FixedLocator, LogLocator, MaxNLocator,
                               NullFormatter, NullLocator, ScalarFormatter)

import style  # selects the Agg backend before it imports pyplot

PROG = "ddlsim-plots"


class InputError(Exception):
    """What is wrong with one input file."""

    def __init__(self, path, message):
        super().__init__(message)
        self.path = path
        self.message = message


# ---------------------------------------------------------------------------------------
# Reading JSON


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(path, e.strerror or str(e))
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")


def field(path, obj, dotted, where):
    """obj's field at a dot-separated path; where names obj in the message."""
    value = obj
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise InputError(path, f"{where}: missing field '{dotted}'")
        value = value[key]
    return value


def has_field(obj, dotted):
    """Whether obj has a field at a dot-separated path."""
    for key in dotted.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return False
        obj = obj[key]
    return True


def json_number(path, obj, dotted, where):
    value = field(path, obj, dotted, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(path, f"{where}: field '{dotted}' is not a number: {json.dumps(value)}")
    return float(value)


def json_list(path, obj, dotted, where):
    value = field(path, obj, dotted, where)
    if not isinstance(value, list):
        raise InputError(path, f"{where}: field '{dotted}' is not a list")
    return value


def json_string(path, obj, dotted, where):
    value = field(path, obj, dotted, where)
    if not isinstance(value, str):
        raise InputError(path, f"{where}: field '{dotted}' is not a string")
    return value


def top_object(path, doc):
    if not isinstance(doc, dict):
        raise InputError(path, "expected a JSON object at the top level")
    return doc


# ---------------------------------------------------------------------------------------
# Reading CSV


class Table:
    """A CSV file: its header and its rows as dicts, each with its line number."""

    def __init__(self, path, header, rows):
        self.path = path
        self.header = header
        self.rows = rows  # [(line, {column: cell})]

    def error(self, line, message):
        return InputError(self.path, f"line {line}: {message}")

    def number(self, line, row, column, empty=None):
        """The cell as a float; an empty cell gives `empty`, or an error if it is None."""
        cell = row[column].strip()
        if cell == "":
            if empty is None:
                raise self.error(line, f"column '{column}' is empty")
            return empty
        try:
            value = float(cell)
        except ValueError:
            raise self.error(line, f"column '{column}': '{cell}' is not a number")
        if not math.isfinite(value):
            raise self.error(line, f"column '{column}': '{cell}' is not a finite number")
        return value


def load_csv(path, required):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except OSError as e:
        raise InputError(path, e.strerror or str(e))
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header:
            raise InputError(path, "empty file: no CSV header")
        header = [h.strip() for h in header]
        missing = [c for c in required if c not in header]
        if missing:
            names = ", ".join(f"'{c}'" for c in missing)
            raise InputError(path, f"missing column{'s' if len(missing) > 1 else ''} {names}")
        rows = []
        for cells in reader:
            if not cells:
                continue  # a blank line
            if len(cells) != len(header):
                raise InputError(path, f"line {reader.line_num}: {len(cells)} fields, "
                                       f"the header has {len(header)}")
            rows.append((reader.line_num, dict(zip(header, cells))))
    except csv.Error as e:
        raise InputError(path, f"line {reader.line_num}: {e}")
    if not rows:
        raise InputError(path, "no data rows")
    return Table(path, header, rows)


def same_value(a, b):
    """Whether two CSV cells hold the same value: equal numbers ('4', '4.0') or text."""
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def varied_columns(table):
    """The columns a ddlsim sweep varied: those between 'point' and 'strategy'."""
    h = table.header
    if "point" in h and "strategy" in h and h.index("point") < h.index("strategy"):
        return h[h.index("point") + 1:h.index("strategy")]
    return []


def first_values(table, columns):
    """Each column's first value in file order (a sweep's first listed value)."""
    _, row = table.rows[0]
    return {c: row[c].strip() for c in columns}


def usable(table, row):
    """A sweep row with metrics: status 'ok' or 'out_of_memory' (no status column: any)."""
    if "status" in table.header:
        return row["status"].strip() in ("ok", "out_of_memory")
    return True


# ---------------------------------------------------------------------------------------
# Shared by several sub-commands


def load_runs(paths):
    """[(path, [(label, strategy)])] of `ddlsim run --json` reports. A label is the
    strategy's name; with several files, 'scenario / name', or 'file / name' when two files
    have the same scenario."""
    reports = []
    for path in paths:
        doc = top_object(path, load_json(path))
        strategies = json_list(path, doc, "strategies", "report")
        if not strategies:
            raise InputError(path, "report: 'strategies' is empty")
        for i, s in enumerate(strategies):
            if not isinstance(s, dict):
                raise InputError(path, f"strategies.{i}: not an object")
            json_string(path, s, "name", f"strategies.{i}")
        reports.append((path, doc.get("scenario"), strategies))
    scenarios = [scenario for _, scenario, _ in reports]
    by_scenario = all(isinstance(s, str) for s in scenarios) and len(set(scenarios)) == len(paths)
    out = []
    for path, scenario, strategies in reports:
        prefix = scenario if by_scenario else os.path.splitext(os.path.basename(path))[0]
        out.append((path, [(s["name"] if len(paths) == 1 else f"{prefix} / {s['name']}", s)
                           for s in strategies]))
    return out


class Top:
    """What goes above a figure's axes: the --title, then a legend of `labels` in as many
    columns as fit in the figure's width (a 7 pt character is about 0.05 in wide)."""

    def __init__(self, args, labels=(), legend_title=None, ncol=None):
        self.title = args.title
        self.wide = args.wide
        self.legend_title = legend_title
        title_lines = legend_title.count("\n") + 1 if legend_title else 0
        width_in = (style.WIDE_IN if args.wide else style.NARROW_IN) - 0.2
        entry_in = 0.3 + 0.05 * max((len(label) for label in labels), default=0)
        self.ncol = ncol or max(1, min(len(labels), int(width_in // entry_in)))
        rows = math.ceil(len(labels) / self.ncol) + title_lines
        self.legend_in = 0.06 + 0.135 * rows if labels else 0.0
        self.title_in = 0.25 if self.title else 0.0

    def figure(self, plot_in, nrows=1, ncols=1, **kwargs):
        """A figure with plot_in inches for its axes, the rest of its height above them."""
        height = plot_in + self.title_in + self.legend_in
        fig, axes = style.figure(height, self.wide, nrows, ncols, **kwargs)
        above = (self.title_in + self.legend_in) / height
        fig.get_layout_engine().set(rect=(0, 0, 1, 1 - above))
        if self.title:
            fig.text(0.5, 1 - 0.04 / height, self.title, ha="center", va="top", fontsize=9)
        self.height = height
        return fig, axes

    def legend(self, fig, handles):
        fig.legend(handles=handles, loc="upper left", ncol=self.ncol, borderaxespad=0,
                   bbox_to_anchor=(0.005, 1 - (self.title_in + 0.03) / self.height),
                   handlelength=1.4, columnspacing=1.0, title=self.legend_title,
                   title_fontsize=7, alignment="left")


def category_ticks(ax, labels, room_in):
    """Strategy names under the bars, slanted when they would not fit side by side in
    room_in inches (a 7 pt character is about 0.05 in wide)."""
    slant = 0.05 * sum(len(label) + 2 for label in labels) > room_in
    ax.set_xticks(range(len(labels)), labels, rotation=30 if slant else 0,
                  ha="right" if slant else "center", rotation_mode="anchor")


def bar_label(ax, x, y, text, side):
    """A small label just left or right of the point (x, y) of a horizontal bar."""
    return ax.annotate(text, (x, y), xytext=(-3 if side == "right" else 3, 0),
                       textcoords="offset points", ha=side, va="center", fontsize=6.5)


def widen_to_fit(fig, ax, texts):
    """Widens the x limits until the labels beside the bars lie inside the axes."""
    for _ in range(4):
        fig.canvas.draw()
        to_data = ax.transData.inverted()
        lo, hi = ax.get_xlim()
        new_lo, new_hi = lo, hi
        for t in texts:
            (x0, _), (x1, _) = to_data.transform(t.get_window_extent().get_points())
            new_lo, new_hi = min(new_lo, x0), max(new_hi, x1)
        if (new_lo, new_hi) == (lo, hi):
            return
        margin = 0.01 * (new_hi - new_lo)
        ax.set_xlim(new_lo - (margin if new_lo < lo else 0),
                    new_hi + (margin if new_hi > hi else 0))


def bar_room(args):
    """Inches along the x axis of a one-panel figure."""
    return (style.WIDE_IN if args.wide else style.NARROW_IN) - 0.7


def series_style(k):
    """The colour and marker of the k-th line or scatter series."""
    return style.SERIES[k % len(style.SERIES)], style.MARKERS[k % len(style.MARKERS)]


def fmt_value(v):
    """A number as it reads best in a label: 3 significant digits, no trailing zeros."""
    return f"{v:.3g}"


# ---------------------------------------------------------------------------------------
# breakdown


# (compute_s less its interference: drawn as "compute" beside the slice communication
# added to it; a report without the field, from before it existed, has none.)
INTERFERENCE = "breakdown.compute_parts_s.interference"
BREAKDOWN_PARTS = [
    ("compute", "breakdown.compute_s", "compute"),
    ("interference", INTERFERENCE, "compute slowed by comm."),
    ("tp", "breakdown.exposed_comm_s.tp", "exposed TP comm."),
    ("pp", "breakdown.exposed_comm_s.pp", "exposed PP comm."),
    ("dp", "breakdown.exposed_comm_s.dp", "exposed DP comm."),
    ("other", "breakdown.exposed_comm_s.other", "exposed other comm."),
    ("bubble", "breakdown.bubble_s", "pipeline bubble"),
]


def plot_breakdown(args):
    labels, values, steps = [], [], []
    for path, strategies in load_runs(args.files):
        for i, (label, s) in enumerate(strategies):
            where = f"strategies.{i}"
            labels.append(label)
            row = []
            for _, key, _ in BREAKDOWN_PARTS:
                missing = key == INTERFERENCE and not has_field(s, key)
                row.append(0.0 if missing else json_number(path, s, key, where))
            row[0] -= row[1]
            values.append(row)
            steps.append(json_number(path, s, "step_time_s", where))
    values = np.array(values)
    shown = [j for j in range(len(BREAKDOWN_PARTS)) if values[:, j].any()] or [0]
    n = len(labels)
    vertical = args.vertical
    top = Top(args, [BREAKDOWN_PARTS[j][2] for j in shown])
    fig, ax = top.figure(1.9 if vertical else 0.55 + 0.24 * n)
    pos = np.arange(n)
    base = np.zeros(n)
    handles = []
    for j in shown:
        part, _, text = BREAKDOWN_PARTS[j]
        colour = style.BREAKDOWN[part]
        if vertical:
            ax.bar(pos, values[:, j], 0.65, bottom=base, color=colour, edgecolor="white")
        else:
            ax.barh(pos, values[:, j], 0.65, left=base, color=colour, edgecolor="white")
        base += values[:, j]
        handles.append(Patch(facecolor=colour, label=text))
    longest = max(steps) if max(steps) > 0 else 1.0
    texts = []
    for p, step in zip(pos, steps):
        if vertical:
            ax.annotate(f"{fmt_value(step)} s", (p, step), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=6.5)
        else:
            texts.append(bar_label(ax, step, p, f"{fmt_value(step)} s", "left"))
    if vertical:
        category_ticks(ax, labels, bar_room(args))
        ax.set_ylabel("step time (s)")
        ax.set_ylim(0, longest * 1.12)
        ax.set_xlim(-0.6, n - 0.4)
    else:
        ax.set_yticks(pos, labels)
        ax.invert_yaxis()  # the first strategy on top
        ax.set_xlabel("step time (s)")
        ax.set_xlim(0, longest)
        ax.set_ylim(n - 0.4, -0.6)
        ax.tick_params(axis="y", length=0)
    top.legend(fig, handles)
    if texts:
        widen_to_fit(fig, ax, texts)
    return fig


# ---------------------------------------------------------------------------------------
# scaling


def plot_scaling(args):
    path = args.file
    table = load_csv(path, [args.x])
    # A sweep names the strategy in 'strategy', a run CSV in 'name'.
    strategy_col = "name" if "strategy" not in table.header and "name" in table.header \
        else "strategy"
    for column in (strategy_col, "mfu", "tokens_per_s", "samples_per_s"):
        if column not in table.header:
            raise InputError(path, f"missing column '{column}'")
    where = {}
    for item in args.where:
        column, _, value = item.partition("=")
        if column not in table.header:
            raise InputError(path, f"no column '{column}' (--where {item})")
        where[column] = value
    for column in args.by:
        if column not in table.header:
            raise InputError(path, f"no column '{column}' (--by {column})")

    rows = [(line, r) for line, r in table.rows
            if usable(table, r) and r[strategy_col].strip()
            and all(same_value(r[c], v) for c, v in where.items())]

    # The other varied columns are held at their first value, except those that only
    # follow x (cluster.nodes when x is devices: each of its values has one x).
    def follows_x(column):
        seen = {}
        for line, r in rows:
            key = (r[strategy_col], r[column].strip())
            seen.setdefault(key, set()).add(r[args.x].strip())
        return all(len(xs) == 1 for xs in seen.values())

    first = first_values(table, varied_columns(table))
    held = {c: v for c, v in first.items()
            if c != args.x and c not in where and c not in args.by and not follows_x(c)}
    rows = [(line, r) for line, r in rows if all(same_value(r[c], v) for c, v in held.items())]
    if not rows:
        raise InputError(path, "no row with metrics (status 'ok' or 'out_of_memory') "
                               "matches the selection")

    tokens = all(table.number(line, r, "tokens_per_s", empty=0.0) > 0 for line, r in rows)
    metric = "tokens_per_s" if tokens else "samples_per_s"
    lines = {}
    for line, r in rows:
        name = r[strategy_col].strip()
        label = ", ".join([name] + [f"{c} = {r[c].strip()}" for c in args.by])
        x = table.number(line, r, args.x)
        points = lines.setdefault(label, {})
        if x in points:
            raise table.error(line, f"a second row for {label} at {args.x} = {fmt_value(x)}; "
                                    "choose one with --where or --by")
        oom = (r.get("status", "").strip() == "out_of_memory"
               or r.get("fits_in_memory", "").strip() == "false")
        points[x] = (table.number(line, r, metric), 100 * table.number(line, r, "mfu"), oom)

    xs = sorted({x for points in lines.values() for x in points})
    # Device and node counts usually double: log axes, where ideal scaling is a line.
    log_x = xs[0] > 0 and xs[-1] / xs[0] >= 2
    any_oom = any(p[2] for points in lines.values() for p in points.values())
    title = None
    if held:  # say which values the other varied columns keep
        title = textwrap.fill("at " + ", ".join(f"{c} = {v}" for c, v in held.items()),
                              100 if args.wide else 48)
    extra = ["ideal linear scaling"] + (["does not fit in memory"] if any_oom else [])
    top = Top(args, list(lines) + extra, legend_title=title)
    if args.wide:
        fig, (ax_t, ax_m) = top.figure(2.0, 1, 2)
    else:
        fig, (ax_t, ax_m) = top.figure(3.1, 2, 1, sharex=True)
    handles = []
    for k, (label, points) in enumerate(lines.items()):
        colour, marker = series_style(k)
        px = sorted(points)
        thr = [points[x][0] for x in px]
        mfu = [points[x][1] for x in px]
        oom = [points[x][2] for x in px]
        for ax, ys in ((ax_t, thr), (ax_m, mfu)):
            ax.plot(px, ys, color=colour, zorder=2)
            for x, y, o in zip(px, ys, oom):
                ax.plot([x], [y], marker=marker, color=colour, zorder=3,
                        markerfacecolor="white" if o else colour)
        if len(px) > 1 and px[0] > 0:
            ax_t.plot(px, [thr[0] * x / px[0] for x in px], color=colour, linestyle=":",
                      linewidth=0.8, zorder=1)
        handles.append(Line2D([], [], color=colour, marker=marker, label=label))
    handles.append(Line2D([], [], color=style.GREY, linestyle=":", linewidth=0.8,
                          label=extra[0]))
    if any_oom:
        handles.append(Line2D([], [], color=style.GREY, marker="o", linestyle="",
                              markerfacecolor="white", label=extra[1]))

    unit = "tokens/s" if tokens else "samples/s"
    ax_t.set_ylabel(f"throughput ({unit})")
    ax_m.set_ylabel("MFU (%)")
    ax_m.set_ylim(bottom=0)
    for ax in (ax_t, ax_m):
        style.light_grid(ax)
        if log_x:
            ax.set_xscale("log", base=2)
        if len(xs) <= 10:  # a tick at each x of the data
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
        formatter = ScalarFormatter()
        formatter.set_scientific(False)
        ax.xaxis.set_major_formatter(formatter)
    if log_x:
        ax_t.set_yscale("log")
        low, high = ax_t.get_ylim()
        # 1, 2, 5 per decade; within less than a decade, a few round numbers.
        ax_t.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)) if high / low >= 10
                                     else MaxNLocator(4))
        ax_t.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax_t.set_ylim(bottom=0)
    ax_t.yaxis.set_major_formatter(EngFormatter(sep=""))  # 200k, 1M
    if args.wide:
        ax_t.set_xlabel(args.x)
    ax_m.set_xlabel(args.x)
    top.legend(fig, handles)
    return fig


# ---------------------------------------------------------------------------------------
# memory


MEMORY_PARTS = ["weights", "gradients", "optimizer", "activations", "runtime"]
MEMORY_TEXT = {"optimizer": "optimizer states", "runtime": "runtime (CUDA, NCCL)"}
GIB = 2 ** 30  # reports give capacities and peaks in GiB


def plot_memory(args):
    labels, parts, capacity = [], [], []
    for path, strategies in load_runs(args.files):
        for i, (label, s) in enumerate(strategies):
            where = f"strategies.{i}"
            labels.append(label)
            parts.append([json_number(path, s, f"memory_breakdown_bytes.{p}", where) / GIB
                          for p in MEMORY_PARTS])
            capacity.append(json_number(path, s, "device_memory_bytes", where) / GIB)
    parts = np.array(parts)
    n = len(labels)
    several = len(set(capacity)) > 1
    top = Top(args, [MEMORY_TEXT.get(p, p) for p in MEMORY_PARTS] +
              (["device capacity"] if several else []))
    fig, ax = top.figure(1.9)
    pos = np.arange(n)
    base = np.zeros(n)
    handles = []
    for j, part in enumerate(MEMORY_PARTS):
        colour = style.MEMORY[part]
        ax.bar(pos, parts[:, j], 0.65, bottom=base, color=colour, edgecolor="white")
        base += parts[:, j]
        handles.append(Patch(facecolor=colour, label=MEMORY_TEXT.get(part, part)))
    if not several:
        ax.axhline(capacity[0], color=style.BLACK, linestyle="--", linewidth=0.8)
        ax.annotate(f"device capacity ({fmt_value(capacity[0])} GiB)", (n - 0.45, capacity[0]),
                    xytext=(0, 1.5), textcoords="offset points", ha="right", va="bottom",
                    fontsize=6.5)
    else:  # strategies on different accelerators: a line over each bar
        ax.hlines(capacity, pos - 0.42, pos + 0.42, color=style.BLACK, linestyle="--",
                  linewidth=0.8)
        handles.append(Line2D([], [], color=style.BLACK, linestyle="--", linewidth=0.8,
                              label="device capacity"))
    category_ticks(ax, labels, bar_room(args))
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, max(max(capacity), base.max()) * 1.12)
    ax.set_ylabel("memory per device (GiB)")
    style.light_grid(ax, axis="y")
    top.legend(fig, handles)
    return fig


# ---------------------------------------------------------------------------------------
# timeline


DEFAULT_TRACKS = r"^dp0\..*\.compute$"


def task_kind(name):
    """forward, backward, recompute, optimizer or other, from a compute task's name."""
    n = name.lower()
    if "recompute" in n:
        return "recompute"
    if "optimizer" in n:
        return "optimizer"
    if n.startswith("bwd") or "backward" in n:
        return "backward"
    if n.startswith("fwd") or "forward" in n:
        return "forward"
    return "other"


def plot_timeline(args):
    path = args.file
    doc = load_json(path)
    if isinstance(doc, dict):
        events = json_list(path, doc, "traceEvents", "trace")
    elif isinstance(doc, list):
        events = doc
    else:
        raise InputError(path, "expected a Chrome trace: an object with 'traceEvents' or a list")
    pattern = args.tracks or re.compile(DEFAULT_TRACKS)

    names, order = {}, {}
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise InputError(path, f"traceEvents.{i}: not an object")
        if e.get("ph") == "M" and e.get("name") in ("thread_name", "thread_sort_index"):
            track = (e.get("pid"), e.get("tid"))
            if e["name"] == "thread_name":
                names[track] = json_string(path, e, "args.name", f"traceEvents.{i}")
            else:
                order[track] = json_number(path, e, "args.sort_index", f"traceEvents.{i}")
    compute = [t for t in names if names[t].endswith(".compute")]
    if args.tracks is not None:
        tracks = [t for t in names if pattern.search(names[t])]
        if not tracks:
            raise InputError(path, f"no track name matches --tracks '{args.tracks.pattern}'")
    else:
        tracks = [t for t in compute if pattern.search(names[t])] or compute
        if not tracks:
            raise InputError(path, "no track whose name ends in '.compute' "
                                   "(thread_name metadata events)")
    tracks.sort(key=lambda t: order.get(t, math.inf))  # stable: else in metadata order
    row = {t: k for k, t in enumerate(tracks)}

    bars = {}  # (row, kind) -> [(start, duration)]
    end = 0.0
    for i, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        track = (e.get("pid"), e.get("tid"))
        if track not in row:
            continue
        where = f"traceEvents.{i}"
        ts = json_number(path, e, "ts", where)
        dur = json_number(path, e, "dur", where)
        kind = task_kind(json_string(path, e, "name", where))
        bars.setdefault((row[track], kind), []).append((ts, dur))
        end = max(end, ts + dur)
    if not bars:
        raise InputError(path, "no complete ('X') events on the selected tracks")

    start = min(ts for spans in bars.values() for ts, _ in spans)
    span_us = end - start
    unit, scale = (("s", 1e-6) if span_us >= 1e6 else ("ms", 1e-3) if span_us >= 1e3
                   else ("µs", 1.0))
    labels = [names[t] for t in tracks]
    if all(label.endswith(".compute") for label in labels):
        labels = [label[:-len(".compute")] for label in labels]
    n = len(tracks)
    kinds = [k for k in style.TASK_KINDS if any(kk == k for _, kk in bars)]
    top = Top(args, kinds)
    fig, ax = top.figure(0.55 + 0.22 * max(n, 2))
    for (r, kind), spans in sorted(bars.items()):
        ax.broken_barh([((ts - start) * scale, dur * scale) for ts, dur in spans],
                       (r - 0.38, 0.76), facecolors=style.TASK_KINDS[kind], linewidth=0)
    ax.set_yticks(range(n), labels)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, span_us * scale)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.tick_params(axis="y", length=0)
    ax.spines["left"].set_visible(False)
    handles = [Patch(facecolor=style.TASK_KINDS[k], label=k) for k in kinds]
    top.legend(fig, handles)
    return fig


# ---------------------------------------------------------------------------------------
# links


def plot_links(args):
    path = args.file
    table = load_csv(path, ["strategy", "link", "utilization"])
    if args.kind is not None and "kind" not in table.header:
        raise InputError(path, "missing column 'kind' (--kind)")
    strategies, links, value, peak = [], [], {}, {}
    for line, r in table.rows:
        if args.kind is not None and r["kind"].strip() != args.kind:
            continue
        s, link = r["strategy"].strip(), r["link"].strip()
        u = table.number(line, r, "utilization")
        if u < 0:
            raise table.error(line, f"column 'utilization': {r['utilization']} is negative")
        if (link, s) in value:
            raise table.error(line, f"a second row for strategy '{s}', link '{link}'")
        if s not in strategies:
            strategies.append(s)
        if link not in links:
            links.append(link)
        value[(link, s)] = 100 * u
        peak[link] = max(peak.get(link, 0.0), 100 * u)
    if not links:
        raise InputError(path, f"no link of kind '{args.kind}'")
    chosen = sorted(links, key=lambda link: -peak[link])[:args.top]  # ties: file order
    grid = np.full((len(chosen), len(strategies)), np.nan)
    for i, link in enumerate(chosen):
        for j, s in enumerate(strategies):
            grid[i, j] = value.get((link, s), np.nan)
    vmax = np.nanmax(grid) if np.nanmax(grid) > 0 else 1.0
    cmap = style.plt.get_cmap(style.SEQUENTIAL_CMAP).with_extremes(bad=style.PALE_GREY)
    norm = Normalize(0, vmax)
    fig, ax = Top(args).figure(0.9 + 0.14 * len(chosen))
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, norm=norm, aspect="auto",
                      interpolation="nearest")
    if not args.no_values and len(strategies) <= 10:
        for i in range(len(chosen)):
            for j in range(len(strategies)):
                v = grid[i, j]
                if np.isnan(v):
                    continue
                red, green, blue, _ = cmap(norm(v))  # white numbers on dark cells
                dark = 0.2126 * red + 0.7152 * green + 0.0722 * blue < 0.5
                ax.text(j, i, f"{v:.0f}" if v >= 9.95 else f"{v:.1f}", ha="center",
                        va="center", fontsize=6, color="white" if dark else "black")
    ax.set_yticks(range(len(chosen)), [link.replace(" -> ", " → ") for link in chosen],
                  fontsize=6)
    category_ticks(ax, strategies, 0.4 * bar_room(args))
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    bar = fig.colorbar(image, ax=ax, fraction=0.08, pad=0.03, aspect=30, format="%g")
    bar.set_label("utilization (% of line rate)")
    bar.outline.set_visible(False)
    bar.ax.tick_params(labelsize=6.5, width=0.5, length=2)
    return fig


# ---------------------------------------------------------------------------------------
# convergence


def plot_convergence(args):
    series = []
    for path in args.files:
        doc = top_object(path, load_json(path))
        method = json_string(path, doc, "method", "search")
        points = json_list(path, doc, "convergence", "search")
        if not points:
            raise InputError(path, "search: 'convergence' is empty")
        xs, ys = [], []
        for i, p in enumerate(points):
            where = f"convergence.{i}"
            if not isinstance(p, dict):
                raise InputError(path, f"{where}: not an object")
            xs.append(json_number(path, p, "evaluations", where))
            ys.append(json_number(path, p, "best_estimate_s", where))
            if args.logx and xs[-1] <= 0:
                raise InputError(path, f"{where}: evaluations is {xs[-1]:g}, not on a log axis "
                                       "(--logx)")
        series.append((path, method, xs, ys))
    methods = [m for _, m, _, _ in series]
    fig, ax = Top(args).figure(style.HEIGHT_IN)
    handles = []
    for k, (path, method, xs, ys) in enumerate(series):
        label = method if methods.count(method) == 1 else \
            f"{method} ({os.path.splitext(os.path.basename(path))[0]})"
        colour, marker = series_style(k)
        ax.step(xs, ys, where="post", color=colour)
        ax.plot(xs[-1:], ys[-1:], marker=marker, color=colour, linestyle="")
        handles.append(Line2D([], [], color=colour, marker=marker, label=label))
    if args.logx:
        ax.set_xscale("log")
    ax.set_xlabel("plans evaluated")
    ax.set_ylabel("best estimated step time (s)")
    style.light_grid(ax)
    ax.legend(handles=handles, loc="best")
    return fig


# ---------------------------------------------------------------------------------------
# accuracy


QUANTITY = {"s": "step time", "us": "time", "GB/s": "bus bandwidth"}


def plot_accuracy(args):
    path = args.file
    group_col = args.by
    table = load_csv(path, ["error", "refused", group_col])
    # Since the nccl suite, a 'unit' column says what 'measured' and 'predicted' are in;
    # before, every case was a step time in 'measured_s' and 'predicted_s'.
    if "unit" in table.header:
        columns = {"measured": "measured", "predicted": "predicted"}
    else:
        columns = {"measured": "measured_s", "predicted": "predicted_s"}
    for column in columns.values():
        if column not in table.header:
            raise InputError(path, f"missing column '{column}'")
    units = list(dict.fromkeys(r["unit"].strip() if "unit" in table.header else "s"
                               for _, r in table.rows))
    unit = args.unit if args.unit is not None else "s" if "s" in units else units[0]
    if unit not in units:
        raise InputError(path, f"no case in unit '{unit}' (units: {', '.join(units)})")
    groups = {}
    for line, r in table.rows:
        if "unit" in table.header and r["unit"].strip() != unit:
            continue
        g = groups.setdefault(r[group_col].strip(),
                              {"measured": [], "predicted": [], "error": [], "refused": 0})
        if r["refused"].strip():
            g["refused"] += 1
            continue
        for key, column in columns.items():
            g[key].append(table.number(line, r, column))
            if g[key][-1] <= 0:
                raise table.error(line, f"column '{column}' is not positive")
        g["error"].append(abs(table.number(line, r, "error")))
        g.setdefault("signed", []).append(table.number(line, r, "error"))
    values = [v for g in groups.values() for v in g["measured"] + g["predicted"]]
    if not values:
        raise InputError(path, f"every case in unit '{unit}' was refused: nothing to plot")
    lo, hi = min(values) / 1.25, max(values) * 1.25
    cases = len(values) // 2
    top = Top(args, list(groups), legend_title="mean |error|, cases", ncol=1)
    # Wide: beside the square scatter, each case's signed error against its measured
    # figure, where a trend with scale (or a suite's bias) shows that the scatter's log
    # axes flatten.
    if args.wide:
        fig, (ax, side) = top.figure(3.0, ncols=2, width_ratios=(1, 1.25))
    else:
        fig, ax = top.figure(2.6)
        side = None
    line_x = np.geomspace(lo, hi, 64)
    ax.fill_between(line_x, line_x * 0.8, line_x * 1.2, color=style.GREY, alpha=0.15,
                    linewidth=0, zorder=0)
    ax.fill_between(line_x, line_x * 0.9, line_x * 1.1, color=style.GREY, alpha=0.3,
                    linewidth=0, zorder=0)
    ax.plot(line_x, line_x, color=style.BLACK, linewidth=0.7, zorder=1)
    series = []
    for k, (name, g) in enumerate(groups.items()):
        colour, marker = series_style(k)
        errors, refused = g["error"], g["refused"]
        label = name
        if errors:
            ax.scatter(g["measured"], g["predicted"], s=10 if cases < 300 else 4, marker=marker,
                       facecolors="none", edgecolors=colour, linewidths=0.6, alpha=0.85,
                       zorder=2)
            if side is not None:
                side.scatter(g["measured"], [100 * e for e in g["signed"]],
                             s=10 if cases < 300 else 4, marker=marker, facecolors="none",
                             edgecolors=colour, linewidths=0.6, alpha=0.85, zorder=2)
            label += f": {100 * sum(errors) / len(errors):.1f} %, {len(errors)}"
            label += f" (+{refused} refused)" if refused else ""
        else:
            label += f": all {refused} refused"
        series.append(Line2D([], [], color=colour, marker=marker, linestyle="",
                             markerfacecolor="none", label=label))
    references = [Line2D([], [], color=style.BLACK, linewidth=0.7, label="predicted = measured"),
                  Patch(facecolor=style.GREY, alpha=0.45, label="±10 %"),
                  Patch(facecolor=style.GREY, alpha=0.15, label="±20 %")]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal", adjustable="box", anchor="W")
    quantity = f"{QUANTITY.get(unit, 'value')} ({'µs' if unit == 'us' else unit})"
    ax.set_xlabel(f"measured {quantity}")
    ax.set_ylabel(f"predicted {quantity}")
    if side is not None:
        side.axhspan(-20, 20, color=style.GREY, alpha=0.15, linewidth=0, zorder=0)
        side.axhspan(-10, 10, color=style.GREY, alpha=0.3, linewidth=0, zorder=0)
        side.axhline(0, color=style.BLACK, linewidth=0.7, zorder=1)
        side.set_xscale("log")
        side.set_xlim(lo, hi)
        signed = [100 * e for g in groups.values() for e in g.get("signed", [])]
        reach = max(25.0, 1.1 * max(abs(e) for e in signed))
        side.set_ylim(-reach, reach)
        side.set_xlabel(f"measured {quantity}")
        side.set_ylabel("error (predicted - measured) / measured (%)")
        style.light_grid(side, axis="y")
    # The series above the axes; the reference lines inside, where they cover the fewest
    # points (in practice a corner away from the diagonal).
    ax.add_artist(Legend(ax, references, [h.get_label() for h in references], loc="best",
                         handlelength=1.4, fontsize=6.5))
    top.legend(fig, series)
    return fig


# ---------------------------------------------------------------------------------------
# tornado


def plot_tornado(args):
    path = args.file
    table = load_csv(path, ["point", "strategy", "status", "step_time_s"])
    varied = varied_columns(table)
    if not varied:
        raise InputError(path, "no varied columns between 'point' and 'strategy'")
    names = []
    for _, r in table.rows:
        if r["strategy"].strip() and r["strategy"].strip() not in names:
            names.append(r["strategy"].strip())
    if not names:
        raise InputError(path, "no row names a strategy")
    strategy = args.strategy if args.strategy is not None else names[0]
    if strategy not in names:
        raise InputError(path, f"no rows for strategy '{strategy}' "
                               f"(strategies: {', '.join(names)})")
    base = first_values(table, varied)
    rows = [(line, r) for line, r in table.rows
            if r["strategy"].strip() == strategy and usable(table, r)
            and r["step_time_s"].strip()]

    def at_baseline(r, except_column=None):
        return all(same_value(r[c], v) for c, v in base.items() if c != except_column)

    baseline = [(line, r) for line, r in rows if at_baseline(r)]
    if not baseline:
        setting = ", ".join(f"{c} = {v}" for c, v in base.items())
        raise InputError(path, f"no baseline for strategy '{strategy}': no row with status "
                               f"'ok' or 'out_of_memory' at {setting}")
    t0 = table.number(*baseline[0], "step_time_s")
    if t0 <= 0:
        raise table.error(baseline[0][0], "the baseline's step_time_s is not positive")

    bars = []  # (column, low %, its value, high %, its value)
    for column in varied:
        changes = {}  # value (marked when it does not fit in memory) -> change in %
        for line, r in rows:
            if at_baseline(r, column):
                value = r[column].strip()
                if r["status"].strip() == "out_of_memory":
                    value += " (OOM)"
                changes.setdefault(value, 100 * (table.number(line, r, "step_time_s") / t0 - 1))
        if len(changes) < 2:
            continue
        low = min(changes, key=changes.get)
        high = max(changes, key=changes.get)
        bars.append((column, changes[low], low, changes[high], high))
    if not bars:
        raise InputError(path, f"strategy '{strategy}': no varied column has two values "
                               "with a step time at the baseline of the others")
    bars.sort(key=lambda b: -(b[3] - b[1]))

    fig, ax = Top(args).figure(0.85 + 0.34 * len(bars))
    lows = [b[1] for b in bars]
    highs = [b[3] for b in bars]
    span = max(max(highs), 0) - min(min(lows), 0) or 1.0
    texts = []
    for k, (column, lo, lo_value, hi, hi_value) in enumerate(bars):
        if lo < 0:
            ax.barh(k, min(hi, 0) - lo, 0.6, left=lo, color=style.BLUE)
        if hi > 0:
            ax.barh(k, hi - max(lo, 0), 0.6, left=max(lo, 0), color=style.VERMILLION)
        if max(-lo, hi) < 0.001:  # no visible bar: say why
            texts.append(bar_label(ax, max(hi, 0), k, "|change| < 0.001 %", "left"))
        else:
            texts.append(bar_label(ax, lo, k, lo_value, "right"))
            texts.append(bar_label(ax, hi, k, hi_value, "left"))
    ax.axvline(0, color=style.BLACK, linewidth=0.6)
    ax.set_yticks(range(len(bars)), [f"{b[0]}\nbaseline {base[b[0]]}" for b in bars],
                  linespacing=1.1)
    ax.set_ylim(len(bars) - 0.5, -0.5)  # the widest bar on top
    ax.set_xlim(min(min(lows), 0) - 0.02 * span, max(max(highs), 0) + 0.02 * span)
    ax.set_xlabel(f"step time vs. baseline (%)\n({strategy}, baseline {fmt_value(t0)} s)")
    ax.tick_params(axis="y", length=0)
    ax.spines["left"].set_visible(False)
    style.light_grid(ax, axis="x")
    widen_to_fit(fig, ax, texts)
    return fig


# ---------------------------------------------------------------------------------------
# Command line


def formats(text):
    chosen = [f.strip().lower() for f in text.split(",") if f.strip()]
    unknown = [f for f in chosen if f not in style.FORMATS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(
            f"'{text}': give one or more of {', '.join(style.FORMATS)}, comma-separated")
    return list(dict.fromkeys(chosen))


def regex(text):
    try:
        return re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"'{text}' is not a regular expression: {e}")


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return value


def parser():
    common = argparse.ArgumentParser(add_help=False)
    out = common.add_argument_group("output")
    out.add_argument("--out", metavar="PREFIX",
                     help="write PREFIX.pdf, PREFIX.png, PREFIX.svg (default: the "
                          "sub-command's name, in the current directory)")
    out.add_argument("--formats", type=formats, default=list(style.FORMATS),
                     help="comma-separated subset of pdf,png,svg (default: all three)")
    out.add_argument("--title", help="a title above the figure (default: none)")
    out.add_argument("--wide", action="store_true",
                     help=f"{style.WIDE_IN} in wide (two columns) instead of {style.NARROW_IN} in")

    top = argparse.ArgumentParser(
        prog=PROG, description="Figures from ddlsim's result files, as PDF, PNG and SVG.",
        epilog="Exit status: 0 done; 1 an output file could not be written; "
               "2 bad command line or input file.")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name, help_text, function):
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(function=function)
        return p

    p = command("breakdown", "stacked bars of where each strategy's step time goes "
                             "(ddlsim run --json)", plot_breakdown)
    p.add_argument("files", nargs="+", metavar="RUN.json", help="ddlsim run --json output")
    p.add_argument("--vertical", action="store_true", help="vertical bars")

    p = command("scaling", "throughput and MFU against a column of a sweep "
                           "(ddlsim sweep --csv)", plot_scaling)
    p.add_argument("file", metavar="SWEEP.csv", help="ddlsim sweep --csv output")
    p.add_argument("--x", required=True, metavar="COLUMN",
                   help="the x column (numbers), e.g. devices or cluster.nodes")
    p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                   help="keep only rows with this value (repeatable)")
    p.add_argument("--by", action="append", default=[], metavar="COLUMN",
                   help="one line per value of this column too (repeatable)")

    p = command("memory", "stacked bars of each strategy's peak memory per device "
                          "(ddlsim run --json)", plot_memory)
    p.add_argument("files", nargs="+", metavar="RUN.json", help="ddlsim run --json output")

    p = command("timeline", "pipeline Gantt chart of a trace (ddlsim run --trace)",
                plot_timeline)
    p.add_argument("file", metavar="TRACE.json", help="ddlsim run --trace output")
    p.add_argument("--tracks", metavar="REGEX", type=regex,
                   help=f"tracks whose name matches (default: '{DEFAULT_TRACKS}', else "
                        "every track ending in '.compute')")

    p = command("links", "heatmap of link utilization per strategy (ddlsim run --links)",
                plot_links)
    p.add_argument("file", metavar="LINKS.csv", help="ddlsim run --links output")
    p.add_argument("--top", type=positive_int, default=20, metavar="N",
                   help="the N links with the highest utilization (default 20)")
    p.add_argument("--kind", help="only links of this kind, e.g. ib-hdr or nvlink3")
    p.add_argument("--no-values", action="store_true", help="no numbers in the cells")

    p = command("convergence", "best estimated step time against plans evaluated "
                               "(ddlsim search --json)", plot_convergence)
    p.add_argument("files", nargs="+", metavar="SEARCH.json", help="ddlsim search --json output")
    p.add_argument("--logx", action="store_true", help="logarithmic x axis")

    p = command("accuracy", "predicted against measured step times (ddlsim validate --csv)",
                plot_accuracy)
    p.add_argument("file", metavar="VALIDATE.csv", help="ddlsim validate --csv output")
    p.add_argument("--by", choices=["suite", "model"], default="suite",
                   help="one series per suite (default) or per model")
    p.add_argument("--unit", help="the cases in this unit: s (default, step times), us or "
                                  "GB/s (nccl suite)")

    p = command("tornado", "sensitivity of step time to each varied parameter of a sweep "
                           "(ddlsim sweep --csv)", plot_tornado)
    p.add_argument("file", metavar="SWEEP.csv", help="ddlsim sweep --csv output")
    p.add_argument("--strategy", metavar="NAME", help="default: the first in the file")
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    style.apply()
    try:
        fig = args.function(args)
    except InputError as e:
        print(f"{PROG}: {e.path}: {e.message}", file=sys.stderr)
        return 2
    try:
        prefix = args.out if args.out is not None else args.command
        for fmt in args.formats:
            target = f"{prefix}.{fmt}"
            try:
                style.write_atomically(target, style.render(fig, fmt))
            except OSError as e:
                print(f"{PROG}: {target}: {e.strerror or e}", file=sys.stderr)
                return 1
    finally:
        style.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
