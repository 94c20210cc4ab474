"""The look shared by every ddlsim figure, and deterministic saving.

Sizes suit a paper: 3.4 in wide (one column) or 7 in (--wide, two columns), exactly, and
8 pt text (7 pt ticks and legends).
Colours are Okabe and Ito's colour-blind-safe palette; each quantity keeps its colour in
every figure (compute is always blue, data-parallel communication always green, ...).
"""

import io
import os
import tempfile

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 (the backend must be chosen first)

NARROW_IN = 3.4
WIDE_IN = 7.0
HEIGHT_IN = 2.4

# Okabe & Ito, "Color Universal Design" (2008), less its yellow (too pale on white).
BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
GREEN = "#009E73"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
# Greys for what is neither a series nor a quantity of its own (bubbles, references).
GREY = "#999999"
LIGHT_GREY = "#BBBBBB"
PALE_GREY = "#EEEEEE"

# Lines and scatter series (strategies, suites, search methods), in order of appearance.
# Seven markers for eight colours: the ninth series differs from the first by its marker.
SERIES = [BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY_BLUE, BLACK, GREY]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]

# Where a step's time goes (ddlsim run's breakdown).
BREAKDOWN = {
    "compute": BLUE,
    "interference": VERMILLION,
    "tp": ORANGE,
    "pp": SKY_BLUE,
    "dp": GREEN,
    "other": PURPLE,
    "bubble": LIGHT_GREY,
}

# What a device's memory holds.
MEMORY = {
    "weights": BLUE,
    "gradients": ORANGE,
    "optimizer": GREEN,
    "activations": PURPLE,
    "runtime": GREY,
}

# Kinds of compute task in a pipeline timeline.
TASK_KINDS = {
    "forward": BLUE,
    "backward": VERMILLION,
    "recompute": ORANGE,
    "optimizer": GREEN,
    "other": GREY,
}

# Colour maps (perceptually uniform and colour-blind safe).
SEQUENTIAL_CMAP = "viridis"

FORMATS = ("pdf", "png", "svg")
PNG_DPI = 300

_RC = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "axes.grid": False,
    "grid.color": "#E5E5E5",
    "grid.linewidth": 0.5,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.minor.width": 0.4,
    "ytick.minor.width": 0.4,
    "xtick.major.size": 3,
    "ytick.major.size": 3,
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    "patch.linewidth": 0.4,
    "hatch.linewidth": 0.5,
    "savefig.dpi": PNG_DPI,
    # Constrained layout fits labels and legends inside the figure, so a figure is exactly
    # as wide as asked: included at the column width, its text keeps its size.
    "figure.constrained_layout.use": True,
    "figure.constrained_layout.h_pad": 0.02,
    "figure.constrained_layout.w_pad": 0.02,
    # TrueType fonts in the PDF (publishers' PDF checks often reject Type 3 fonts); text
    # as paths in the SVG, so that it looks the same where the font is not installed.
    "pdf.fonttype": 42,
    "svg.fonttype": "path",
    # Fixed salt: the SVG's element ids no longer change between runs.
    "svg.hashsalt": "ddlsim-plots",
}

# Metadata that would differ between runs (dates, library versions) left out.
_METADATA = {
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None, "Format": None, "Type": None},
    "png": {"Software": None},
}


def apply():
    """Sets the shared matplotlib defaults."""
    plt.rcdefaults()
    plt.rcParams.update(_RC)


def figure(height=HEIGHT_IN, wide=False, nrows=1, ncols=1, **kwargs):
    """A figure of the column (or, wide, page) width and the given height in inches."""
    width = WIDE_IN if wide else NARROW_IN
    return plt.subplots(nrows, ncols, figsize=(width, height), **kwargs)


def light_grid(ax, axis="both"):
    """Thin grid lines behind the data, for reading values off a dense plot."""
    ax.grid(True, axis=axis, which="major")
    ax.set_axisbelow(True)


def render(fig, fmt):
    """The figure as the bytes of one format, without run-dependent metadata."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, metadata=_METADATA[fmt])
    return buffer.getvalue()


def write_atomically(path, data):
    """Writes data to a temporary file beside path and renames it into place, so that a
    failure never leaves a half-written figure."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ddlsim-plots-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def close(fig):
    plt.close(fig)
