"""What a page offers next to each chart and table: downloads that work without plotly's toolbar (hidden in
presentation mode), and the settings printed under a chart so a slide says what it shows."""

from __future__ import annotations

import importlib.util
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")


def kaleido_available() -> bool:
    """Whether plotly can write static images here: ``kaleido`` installed *and* a Chromium-based browser it can
    drive (kaleido 1.x renders in Chrome/Chromium; ``.ci/run`` installs Debian's ``chromium``)."""
    if importlib.util.find_spec("kaleido") is None:
        return False
    try:
        from choreographer.browsers.chromium import Chromium  # kaleido's browser driver
    except ImportError:  # pragma: no cover - kaleido without its driver
        return False
    try:
        return Chromium.find_browser(skip_local=False) is not None
    except Exception:  # noqa: BLE001 - a best-effort probe: no browser means no static images
        return False


def figure_title(fig: go.Figure) -> str:
    """The figure's title text, one line ('' when it has none): a title wrapped with plotly's ``<br>`` reads as
    the sentence it is."""
    title = fig.layout.title.text
    return re.sub(r"\s*<br\s*/?>\s*", " ", str(title)).strip() if title else ""


def axis_titles(fig: go.Figure) -> dict[str, str]:
    """Title of every x/y axis the figure's traces use (or declares), by axis name ('' where untitled)."""
    layout = fig.to_dict().get("layout", {})
    names = {k for k in layout if re.fullmatch(r"[xy]axis\d*", k)}
    for trace in fig.data:
        for letter in ("x", "y"):
            ref = getattr(trace, f"{letter}axis", None)
            if ref is not None:
                names.add(f"{letter}axis{ref[1:]}")
    return {name: str(((layout.get(name) or {}).get("title") or {}).get("text") or "") for name in sorted(names)}


@dataclass(frozen=True)
class ChartExport:
    """A chart's downloads: its data as CSV (always), a self-contained interactive HTML (on demand, offline),
    and an SVG when kaleido is installed."""

    title: str
    file_stem: str
    csv: bytes
    figure: go.Figure

    def __post_init__(self) -> None:
        if not self.title.strip():
            raise ValueError("a chart needs a title before it is offered for download.")
        if not self.file_stem or _UNSAFE.search(self.file_stem.replace("_", "a")):
            raise ValueError(f"file_stem must be letters, digits and '_'. Found {self.file_stem!r}.")

    def html(self) -> bytes:
        """The interactive figure in one HTML file, plotly.js inlined (works offline; ~4 MB)."""
        return self.figure.to_html(include_plotlyjs=True, full_html=True).encode()

    def svg(self) -> bytes:
        """The figure as SVG (needs kaleido: :func:`kaleido_available`; ~1-4 s: pass the method, not its value,
        to a download button, so it runs only when clicked)."""
        return static_image(self.figure, format="svg")

    def png(self) -> bytes:
        """The figure as a PNG at twice the screen resolution, for slides (needs kaleido; run on click)."""
        return static_image(self.figure, format="png", scale=2)


def static_image(fig: go.Figure, **options) -> bytes:
    """``fig.to_image(**options)``, tried a second time if the first fails: on a loaded machine kaleido's headless
    tab can run the render before its own scripts have loaded (seen once in a full test run beside two benchmarks:
    "ReferenceError: kaleido_scopes is not defined"); a second failure is raised as it is."""
    try:
        return fig.to_image(**options)
    except Exception:  # noqa: BLE001 - any failure of the first render; the retry re-raises a real one
        return fig.to_image(**options)


def file_stem(title: str) -> str:
    """A safe file name from a title: 'ε vs σ (δ = 1e-5)' -> 'vs_1e_5'-like, never empty."""
    stem = _UNSAFE.sub("_", title.encode("ascii", "ignore").decode()).strip("_").lower()[:60]
    return stem or "chart"


def figure_data_csv(fig: go.Figure) -> bytes:
    """Every trace's points as rows (trace, x, y[, error]) — the numbers behind the chart."""
    rows = []
    for i, trace in enumerate(fig.data):
        name = getattr(trace, "name", None) or f"trace {i}"
        x = getattr(trace, "x", None)
        y = getattr(trace, "y", None)
        z = getattr(trace, "z", None)
        if z is not None and x is None and y is None:  # a heatmap / image grid: one row per cell
            for r, row in enumerate(z):
                for c, value in enumerate(row):
                    rows.append({"trace": name, "x": c, "y": r, "value": _plain(value)})
            continue
        if x is None and y is None:
            continue
        ys = list(y) if y is not None else []
        xs = list(x) if x is not None else list(range(len(ys)))
        ys = ys or [math.nan] * len(xs)
        err = getattr(getattr(trace, "error_y", None), "array", None)
        for j, (xv, yv) in enumerate(zip(xs, ys)):
            row = {"trace": name, "x": _plain(xv), "y": _plain(yv)}
            if err is not None and j < len(err):
                row["error_y"] = _plain(err[j])
            rows.append(row)
    return table_csv(pd.DataFrame(rows, columns=None if rows else ["trace", "x", "y"]))


def _plain(value: object) -> object:
    return value.item() if hasattr(value, "item") else value


def chart_export(fig: go.Figure) -> ChartExport:
    """The downloads of one figure; ValueError when the figure has no title (every chart must say what it is)."""
    title = figure_title(fig)
    return ChartExport(title=title, file_stem=file_stem(title), csv=figure_data_csv(fig), figure=fig)


def table_csv(table: pd.DataFrame) -> bytes:
    """A table as UTF-8 CSV (with BOM, so spreadsheet programs read ε and σ correctly)."""
    buffer = io.StringIO()
    table.to_csv(buffer, index=False)
    return buffer.getvalue().encode("utf-8-sig")


# LaTeX's ten special characters, and the symbols the pages print as macros for pdflatex's default encoding.
_LATEX_SYMBOLS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"$<$",  # in text mode pdflatex's default OT1 encoding prints these as other glyphs
    ">": r"$>$",
    "|": r"$|$",
    "ε": r"$\varepsilon$",
    "δ": r"$\delta$",
    "σ": r"$\sigma$",
    "λ": r"$\lambda$",
    "μ": r"$\mu$",
    "γ": r"$\gamma$",
    "α": r"$\alpha$",
    "ℓ": r"$\ell$",
    "∞": r"$\infty$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "±": r"$\pm$",
    "×": r"$\times$",
    "→": r"$\to$",
    "≈": r"$\approx$",
    "√": r"$\surd$",
    "‖": r"$\|$",
    "·": r"$\cdot$",
    "−": "-",
    "—": "---",
    "–": "--",
}


def latex_text(text: str) -> str:
    """One cell as LaTeX text: the ten special characters escaped, the pages' Greek and maths symbols as macros."""
    printable = (ch if ch.isprintable() else " " if ch.isspace() else "" for ch in text)  # a cell stays one line
    return "".join(_LATEX_SYMBOLS.get(ch, ch) for ch in printable)


def table_latex(table: pd.DataFrame) -> bytes:
    """A table as a LaTeX ``tabular`` with booktabs rules, to paste into a paper; numbers to 4 significant digits."""

    def cell(value: object) -> str:
        if isinstance(value, (float, np.floating)):
            v = float(value)
            if math.isnan(v):
                return "--"
            return latex_text(("∞" if v > 0 else "-∞") if math.isinf(v) else f"{v:.4g}")  # 1e-05 stays 1e-05
        return "--" if value is None or value is pd.NA else latex_text(str(value))

    header = " & ".join(latex_text(str(c)) for c in table.columns)
    rows = [" & ".join(cell(v) for v in row) + r" \\" for row in table.itertuples(index=False, name=None)]
    lines = [
        r"% needs \usepackage{booktabs}",
        r"\begin{tabular}{" + "l" * max(1, table.shape[1]) + "}",
        r"\toprule",
        header + r" \\",
        r"\midrule",
        *rows,
        r"\bottomrule",
        r"\end{tabular}",
        "",
    ]
    return "\n".join(lines).encode()


def settings_caption(settings: Mapping[str, object]) -> str:
    """The settings behind a chart in one line, e.g. 'n = 60,000 · ℓ = 256 · σx = 0.0711 · δ = 1e-05'."""
    parts = []
    for name, value in settings.items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, int):
            text = f"{value:,}"
        elif isinstance(value, float):
            text = f"{value:.3g}" if value == 0 or 1e-3 <= abs(value) < 1e5 else f"{value:.2e}"
        else:
            text = str(value)
        parts.append(f"{name} = {text}")
    if not parts:
        raise ValueError("settings_caption needs at least one setting.")
    return "Settings: " + " · ".join(parts)


def image_grid_png(rows: Sequence[Sequence[np.ndarray]], *, scale: int = 3, gap: int = 2) -> bytes:
    """Images laid out in rows (e.g. per class: records, noise-free mixtures, released points) as one PNG.

    Args:
        rows: each row a sequence of images in [0, 1], each (H, W) or (H, W, 3); rows may differ in length and
            images in size (each sits top-left in a cell of the largest; grey ones are drawn in RGB next to RGB).
        scale: nearest-neighbour upscaling, so 28 x 28 digits stay legible on a slide.
        gap: white pixels between images and rows (before scaling).

    Returns:
        The PNG bytes. ValueError for no images or an image that is neither (H, W) nor (H, W, 3).
    """
    from PIL import Image  # Streamlit's own dependency; loaded only when a grid is drawn

    images = [np.asarray(im, dtype=np.float32) for row in rows for im in row]
    if not images:
        raise ValueError("an image grid needs at least one image.")
    if any(im.ndim not in (2, 3) or im.ndim == 3 and im.shape[2] != 3 for im in images):
        raise ValueError(f"every image must be (H, W) or (H, W, 3). Found {sorted({im.shape for im in images})}.")
    rgb = any(im.ndim == 3 for im in images)
    h, w = max(im.shape[0] for im in images), max(im.shape[1] for im in images)
    cols = max(len(row) for row in rows)
    canvas = np.ones((len(rows) * (h + gap) + gap, cols * (w + gap) + gap, *((3,) if rgb else ())), dtype=np.float32)
    for r, row in enumerate(rows):
        for c, im in enumerate(row):
            im = np.clip(np.asarray(im, dtype=np.float32), 0.0, 1.0)
            if rgb and im.ndim == 2:
                im = np.repeat(im[:, :, None], 3, axis=2)
            y, x = gap + r * (h + gap), gap + c * (w + gap)
            canvas[y : y + im.shape[0], x : x + im.shape[1]] = im
    pixels = np.repeat(np.repeat((canvas * 255 + 0.5).astype(np.uint8), scale, axis=0), scale, axis=1)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def preview_png(preview) -> bytes:
    """A :class:`~dpmix_core.synthesis.previews.MixingPreview` of images as one PNG: a row per class with its
    records, then the noise-free mixtures, then the released points (what the Mixed samples page shows)."""
    rows = [[*cls.originals, *cls.clean, *cls.noisy] for cls in preview.classes]
    return image_grid_png([row for row in rows if row])
