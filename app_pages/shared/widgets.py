"""Widgets every page shares: a chart with its downloads, a table's CSV and LaTeX downloads, typed numbers, one's
own data file (its uploader, label column and feature bounds).

Streamlit code only (the exports themselves are built by :mod:`dpmix_core.views.exports`); pages import
these instead of each keeping a copy.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TypeVar

import pandas as pd
import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from dpmix_core.data import (
    Categories,
    Dataset,
    bounds_csv,
    bounds_rows,
    categories_csv,
    categories_rows,
    check_categories,
    found_categories,
    per_feature_bounds,
    read_categories,
    read_feature_bounds,
    rows_categories,
    with_category_bounds,
)
from dpmix_core.data.choice import default_choice
from dpmix_core.data.user import bounds_fit_note, csv_columns, suggested_label_column
from dpmix_core.experiments.run_data import OwnData, open_data_upload
from dpmix_core.privacy.checks import FeatureRange
from dpmix_core.views.exports import (
    chart_export,
    file_stem,
    kaleido_available,
    settings_caption,
    table_csv,
    table_latex,
)
from dpmix_core.views.inputs import parse_count, parse_real

T = TypeVar("T")
PRESENT_CHART_HEIGHT = 720  # presentation mode: one chart per screen
# plotly's toolbar keeps zoom, pan and reset: the rest only widened it over chart titles (the PNG / SVG downloads
# under each chart make its image; without kaleido they are hidden and the toolbar keeps its camera)
MODEBAR_LEFT_OUT = ("toImage", "zoomIn2d", "zoomOut2d", "autoScale2d", "select2d", "lasso2d")
THUMBNAIL_PX = 64  # an image of a record or a released point (Mixed samples)
PRESENT_THUMBNAIL_PX = 128  # the same on a projector


def chart(fig, key: str, settings: dict | None = None) -> None:
    """A chart, its downloads and, when presenting, the release's settings under it.

    Downloads: the chart's data as CSV and the chart as one offline HTML file, always; PNG (2x, for slides)
    and SVG when kaleido and a Chromium browser are present. Images and HTML are made only when clicked.
    """
    if st.session_state.get("present"):
        fig.update_layout(height=PRESENT_CHART_HEIGHT)
    export = chart_export(fig)
    present = bool(st.session_state.get("present"))
    left_out = [b for b in MODEBAR_LEFT_OUT if b != "toImage" or kaleido_available()]  # else its only image export
    config = {"displayModeBar": not present, "modeBarButtonsToRemove": left_out, "displaylogo": False}
    st.plotly_chart(fig, width="stretch", key=key, config=config)
    stem = export.file_stem
    with st.container(horizontal=True):
        st.download_button("Data (CSV)", export.csv, f"{stem}.csv", "text/csv", key=key + "_csv", on_click="ignore")
        st.download_button(
            "Chart (HTML)", export.html, f"{stem}.html", "text/html", key=key + "_html", on_click="ignore"
        )
        if kaleido_available():
            st.download_button("PNG", export.png, f"{stem}.png", "image/png", key=key + "_png", on_click="ignore")
            st.download_button("SVG", export.svg, f"{stem}.svg", "image/svg+xml", key=key + "_svg", on_click="ignore")
    if st.session_state.get("present") and settings:
        st.caption(settings_caption(settings))


def table_download(table, key: str, name: str) -> None:
    """Every table on a page can be taken away as CSV (spreadsheets) and as a LaTeX tabular (papers); ``name`` may
    hold a user's class name ("T-shirt/top"): the file is named by its safe stem."""
    frame = pd.DataFrame(table)
    name = file_stem(name)
    with st.container(horizontal=True):
        st.download_button(
            "Table (CSV)", table_csv(frame), f"{name}.csv", "text/csv", key=key + "_csv", on_click="ignore"
        )
        st.download_button(
            "Table (LaTeX)",
            lambda: table_latex(frame),
            f"{name}.tex",
            "text/x-tex",
            key=key + "_tex",
            on_click="ignore",
        )


def keep_state(defaults: dict[str, object]) -> None:
    """Each session-state key of ``defaults`` set to its value, or to itself when it has one, on every run.

    A run that stops before a widget (an upload's error, say) drops the widget's state in the browser; when it is
    drawn again the browser shows it blank (an empty ℓ, λ = 0) and sends that back, unless the run sets the value
    (Streamlit then sends it along). ``setdefault`` sets it only on the first run; this sets it on all.
    """
    for key, value in defaults.items():
        st.session_state[key] = st.session_state.get(key, value)


def loaded_or_stop(load: Callable[..., T], *args: object) -> T:
    """A page's data, or its one-line error and nothing more of the page (e.g. DPMIX_DATA_DIR naming no folder,
    a malformed upload): never a traceback."""
    try:
        return load(*args)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()


def count_box(
    col, label: str, key: str, *, maximum: int, minimum: int = 1, disabled: bool = False, name: str | None = None
) -> int | None:
    """A count typed as text (60000, 6e4, 60,000); under it, "invalid: …" instead of a clamped value.

    ``key`` is the full session-state key; ``name`` (default: the label up to " —" or " (") names the value in
    the message. Returns the count, or None when the entry is refused (nothing may then be computed from it).
    """
    col.text_input(
        label, key=key, disabled=disabled, help="A whole number; scientific notation (1e6) and 60,000 are accepted."
    )
    what = name or label.split(" —")[0].split(" (")[0]
    try:
        return parse_count(st.session_state[key], name=what, minimum=minimum, maximum=maximum)
    except ValueError as exc:
        col.error(str(exc))
        return None


def real_check(col, value: float, name: str, *, minimum: float) -> float | None:
    """A number input's value, or "invalid: …" under it (no min_value on the input: a browser would silently keep
    the old value). Returns None when refused."""
    try:
        return parse_real(repr(float(value)), name=name, minimum=minimum)
    except ValueError as exc:
        col.error(str(exc))
        return None


def delta_box(col, key: str) -> float | None:
    """delta typed as text (1e-5): 0 < delta <= 0.5, or "invalid: …" under it and None."""
    col.text_input("δ", key=key, help="e.g. 1e-5; at most 0.5, and well below 1/n.")
    try:
        return parse_real(st.session_state[key], name="δ", minimum=0.0, maximum=0.5, strict_minimum=True)
    except ValueError as exc:
        col.error(str(exc))
        return None


def controls_area(label: str = "Settings"):
    """Where a page puts its controls: the page itself, or, when presenting, a closed expander (controls
    collapsed, so each screen shows a chart or a number; the settings are printed under every chart)."""
    if st.session_state.get("present"):
        return st.expander(f"{label} (presentation mode: open to change)", expanded=False)
    return st.container()


HEADLINE_KEY_PREFIX = "screen_"  # app.py's presentation CSS gives each container keyed with it a screen of its own


def headline_area(name: str):
    """Where a page puts its headline (a number and its reading, side by side): when presenting, app.py's CSS
    gives this container a screen of its own with the headline centred in it, number and reading together."""
    return st.container(key=HEADLINE_KEY_PREFIX + name)


def thumbnail_px() -> int:
    """The width of an image of a record or a released point: doubled on a projector, so the larger type's captions
    fit under it on one line and the digits are seen from the back of a room."""
    return PRESENT_THUMBNAIL_PX if st.session_state.get("present") else THUMBNAIL_PX


DATA_FILE_HELP = (
    "CSV: a header row, a label column (picked below once the file is read) holding integer labels or class names, "
    "and numeric feature columns. .npz: arrays x (n, ...) and y (n,)."
)


def data_file_upload(
    prefix: str, *, label: str = "Dataset file", help_text: str = DATA_FILE_HELP
) -> tuple[UploadedFile | None, str | None, Categories]:
    """One's own ``.csv`` / ``.npz`` and, once a CSV is read, its label column and the public categories of its text
    columns: (the upload or None, the column or None, the categories). Keys: ``prefix + "upload"``, and
    ``prefix + "label_column_" + file_id`` (a new file starts from its own default column); the categories'
    (:func:`text_column_categories`) start with ``prefix + "categories"``."""
    upload = st.file_uploader(label, type=["csv", "npz"], key=prefix + "upload", help=help_text)
    label_column = None
    categories: Categories = ()
    if upload is not None and upload.name.lower().endswith(".csv") and (columns := csv_columns(upload.getvalue())):
        label_column = st.selectbox(
            "Label column",
            columns,
            index=columns.index(suggested_label_column(upload.getvalue()) or columns[0]),
            key=prefix + "label_column_" + upload.file_id,
            help="The column holding each record's class; every other column is a feature (numbers, or words with "
            "public categories).",
        )
        categories = text_column_categories(prefix, upload, label_column)
    return upload, label_column, categories


OWN_FILE = "own file"  # the data choice that opens an uploader (dataset_or_own_file)


def dataset_or_own_file(label: str, key: str, datasets: dict[str, str]) -> str:
    """A dataset found on this machine (``datasets``: name -> description; the app's default first chosen) or
    :data:`OWN_FILE`, the last choice, for one's own file."""
    names = [*datasets, OWN_FILE]
    titles = {**datasets, OWN_FILE: "Your own file (.csv / .npz)…"}
    return st.selectbox(label, names, index=names.index(default_choice(datasets)), format_func=titles.get, key=key)


@st.cache_resource(show_spinner="Reading your file…", max_entries=4)
def _saved_data(
    data: bytes, filename: str, label_column: str | None, test_fraction: float, folder: str, categories: Categories
) -> OwnData:
    return open_data_upload(  # kept beside the store: background runs read it from there
        data, filename, folder, label_column=label_column, test_fraction=test_fraction, categories=categories
    )


def held_out_data_file(prefix: str, folder: str, *, missing: str) -> OwnData | None:
    """One's own file (:func:`data_file_upload`) with the share of its records held out as the test split (a slider,
    ``prefix + "test_fraction"``), kept in ``folder`` and split; None with ``missing`` (an info line) before an
    upload, or with the file's one-line error."""
    upload, label_column, categories = data_file_upload(prefix, label="Your data file (.csv or .npz)")
    fraction = st.slider(
        "Held-out test share",
        0.05,
        0.5,
        0.2,
        step=0.05,
        key=prefix + "test_fraction",
        help="Records of each class set aside before anything is released: the models are scored on them. They are "
        "never mixed nor released; the release's ε covers the others only. The same records for every seed.",
    )
    if upload is None:
        st.info(missing)
        return None
    try:
        own = _saved_data(upload.getvalue(), upload.name, label_column, fraction, folder, categories)
    except ValueError as exc:
        st.error(str(exc))
        return None
    st.caption(f"**Data:** {own.dataset.source}. The accuracy read on the held-out records is not itself private.")
    return own


@st.cache_data(show_spinner=False, max_entries=8)
def _found_categories(data: bytes, filename: str, label_column: str | None) -> Categories:
    try:
        return found_categories(data, filename, label_column)
    except ValueError:  # a file that does not parse: reading it says why, next to the upload
        return ()


def text_column_categories(prefix: str, upload: UploadedFile, label_column: str | None) -> Categories:
    """The public categories of a CSV's text columns: a table (column, category), filled from a categories file
    ``prefix + "categories_file"`` or from the words the file holds, that the user checks and confirms public
    (``prefix + "categories_public_" + file_id``); () for a file without text columns. A table that does not parse, or
    an unconfirmed list: one line, and the page stops there."""
    found = _found_categories(upload.getvalue(), upload.name, label_column)
    if not found:
        return ()
    loaded_or_stop(check_categories, upload.name, found)  # names, free text, one word: one line, no table
    listed = ", ".join(f"'{column}' ({len(words)} words)" for column, words in found)
    st.markdown(
        f"**Text columns:** {listed}. Each becomes one-hot features *column=category* (bounds (0, 1)) over its "
        f"public categories. If one of them holds the classes, pick it as the *Label column* above (now "
        f"'{label_column}')."
    )
    file = st.file_uploader(
        "Categories file (optional): a CSV with the header column,category",
        type=["csv"],
        key=prefix + "categories_file",
        help="One row per category, as the CLI's --categories reads it. Without one, the table starts from the words "
        "your file holds.",
    )
    start = found if file is None else loaded_or_stop(read_categories, file.getvalue())
    table_key = f"{prefix}categories_{upload.file_id}_{label_column}_{'' if file is None else file.file_id}"
    edited = st.data_editor(
        pd.DataFrame(categories_rows(start), columns=["column", "category"]),
        key=table_key,  # another file, label column or categories file: a fresh table
        hide_index=True,
        num_rows="dynamic",
        width="stretch",
        column_config={
            "column": st.column_config.TextColumn("Column"),
            "category": st.column_config.TextColumn("Category"),
        },
    )
    categories = loaded_or_stop(rows_categories, edited.itertuples(index=False))
    public = st.checkbox(
        "These categories are public: known without this file (a form's choices, a codebook)",
        key=prefix + "categories_public_" + upload.file_id,
        help="The release's card publishes them. A word only a few records hold is not public knowledge: delete its "
        "row (its records are then refused) or merge it into a public category in your file.",
    )
    st.download_button(
        "Categories file (CSV)",
        categories_csv(categories),
        "categories.csv",
        "text/csv",
        key=prefix + "categories_download",
        on_click="ignore",
        help="This list as a file: load it here next time, or give it to the CLI's --categories.",
    )
    if not public:
        st.warning(
            "Check the categories (filled from the words your file holds unless you loaded a categories file): the "
            "release's card publishes them. Then tick *These categories are public*."
        )
        st.stop()
    return categories


def feature_bounds(prefix: str, records: Dataset) -> FeatureRange:
    """The public bounds of one's own float features: one (lower, upper) pair (keys ``prefix + "lo"`` / ``"hi"``) or,
    with ``prefix + "per_column"`` on, one pair per column from a table (filled from the pair, or from a bounds file
    ``prefix + "bounds_file"``), and a warning beside them where they fit the ``records`` (its training features)
    badly (:func:`bounds_fit_note`). A table that does not parse: its one-line error, and the page stops there."""
    keep_state({prefix + "lo": 0.0, prefix + "hi": 1.0})  # typed bounds survive a run that stops above them
    r1, r2 = st.columns(2)
    lo = r1.number_input("Public lower bound of your features", key=prefix + "lo")
    hi = r2.number_input("Public upper bound of your features", key=prefix + "hi")
    bounds: FeatureRange = (float(lo), float(hi))
    d, names = records.feature_dim, records.feature_names
    per_column = d > 1 and st.toggle(
        "Bounds per column",
        key=prefix + "per_column",
        help="Columns in different units (an age, an income): give each its own public bounds, so each fills [0,1] "
        "and the noise does not swamp the narrow ones. The same guarantee: every record still lies in [0,1]^d.",
    )
    if per_column:
        bounds = _bounds_per_column(prefix, records, bounds)
    bounds = with_category_bounds(bounds, feature_names=names, categories=records.categories)
    st.caption(
        "Bounds must be known without looking at the private data; values outside are clipped."
        + (" The one-hot columns of text columns (0 or 1) have bounds (0, 1)." if records.categories else "")
    )
    if note := bounds_fit_note(records.x_train, bounds, names):
        st.warning(note)
    return bounds


def private_ranges_box(prefix: str) -> tuple[bool, float | None]:
    """A toggle (``prefix + "private_ranges"``) to narrow the public bounds to where the records lie, by noisy
    histograms released with the points (:mod:`dpmix_core.synthesis.private_ranges`), and the ranges' epsilon under
    it (``prefix + "ranges_eps"``): (on, that epsilon, or None when it is refused, its "invalid: …" shown)."""
    keep_state({prefix + "ranges_eps": 0.1})
    on = st.toggle(
        "Narrow the bounds privately",
        key=prefix + "private_ranges",
        help="Bounds much wider than your records crowd them into a sliver of [0,1], where the noise swamps them. "
        "This finds each feature's range inside the public bounds with noisy histograms, released with the points; "
        "the release scales with those ranges. The ε shown (and a target ε) covers the ranges and the points "
        "together. A share of ε as small as a tenth is usually enough: composed, it costs little noise.",
    )
    if not on:
        return False, None
    col = st.columns(3)[0]
    col.number_input("ε of the ranges (alone)", step=0.05, format="%.3f", key=prefix + "ranges_eps")
    return True, real_check(col, st.session_state[prefix + "ranges_eps"], "ε of the ranges", minimum=1e-6)


def _bounds_per_column(prefix: str, records: Dataset, default: tuple[float, float]) -> FeatureRange:
    """The per-column table of :func:`feature_bounds`: its bounds, or its error and a stopped page."""
    d, names = records.feature_dim, records.feature_names
    upload = st.file_uploader(
        "Bounds file (optional): a CSV with the header column,low,high",
        type=["csv"],
        key=prefix + "bounds_file",
        help="One row per feature column; columns it leaves out take the bounds above. The same file works with the "
        "CLI's --feature-bounds.",
    )
    cats = records.categories  # their one-hot features are (0, 1): not in the table
    start = (
        default
        if upload is None
        else loaded_or_stop(
            lambda: read_feature_bounds(upload.getvalue(), feature_names=names, d=d, default=default, categories=cats)
        )
    )
    rows = bounds_rows(start, feature_names=names, d=d, categories=cats)
    columns = zlib.crc32("\n".join(names).encode())
    table_key = f"{prefix}bounds_{d}_{columns}_{'' if upload is None else upload.file_id}"
    edited = st.data_editor(
        pd.DataFrame(rows),
        key=table_key,  # new columns or a new file: a fresh table; new bounds above refill the cells not edited
        disabled=["column"],
        hide_index=True,
        num_rows="fixed",
        width="stretch",
        column_config={
            "column": st.column_config.TextColumn("Column"),
            "low": st.column_config.NumberColumn("Lower bound", format="%g"),
            "high": st.column_config.NumberColumn("Upper bound", format="%g"),
        },
    )
    bounds = loaded_or_stop(
        lambda: per_feature_bounds(edited.itertuples(index=False), feature_names=names, d=d, categories=cats)
    )
    st.download_button(
        "Bounds file (CSV)",
        bounds_csv(bounds, feature_names=names, d=d, categories=cats),
        "feature_bounds.csv",
        "text/csv",
        key=prefix + "bounds_download",
        on_click="ignore",
        help="These bounds as a file: load it here next time, or give it to the CLI's --feature-bounds.",
    )
    return bounds
