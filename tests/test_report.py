"""One-click HTML reports: self-contained, honest, written atomically; bad paths refused before work."""

import html
import re
from dataclasses import replace

import pytest

from dpmix_core.cli.main import main

ARGS = [
    "report",
    "--n",
    "60000",
    "--l",
    "256",
    "--T",
    "10000",
    "--sigma-x",
    "0.0711",
    "--sigma-y",
    "0.0711",
    "--delta",
    "1.6667e-5",
]


def test_report_is_self_contained_and_says_what_the_release_is(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main([*ARGS, "--out", str(out)]) == 0
    page = out.read_text()
    assert "In plain language" in page and "rigorous upper bound" in page and "rdp-wor" in page
    assert "attacker" in page.lower() and "Libraries:" in page
    assert "Privacy statement" in page and "-differential privacy under replace-one adjacency" in page
    assert not re.search(r"<script[^>]+src=", page)  # plotly.js inlined: opens offline
    assert page.count("plotly.js v") <= 2  # inlined once, not per figure
    assert list(tmp_path.iterdir()) == [out]  # no temporary left behind


def test_report_refuses_bad_paths_before_any_work(tmp_path, capsys):
    assert main([*ARGS, "--out", str(tmp_path / "missing" / "r.html")]) == 2
    assert main([*ARGS, "--out", str(tmp_path / "r.pdf")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error:") for line in err)
    assert list(tmp_path.iterdir()) == []


def test_report_of_a_release_with_an_enormous_epsilon_says_so(tmp_path, capsys):
    """n = 100, l = 2, sigma = 1: the tightest eps is above 709, where e^eps overflows a float."""
    out = tmp_path / "r.html"
    args = ["report", "--n", "100", "--l", "2", "--T", "10", "--sigma-x", "1", "--sigma-y", "1", "--delta", "1e-5"]
    assert main([*args, "--out", str(out)]) == 0
    text = re.sub(r"<script.*?</script>", "", out.read_text(), flags=re.S)  # the page without plotly.js
    assert "(rdp-wor; little formal protection)" in text and "no real bound" in text
    assert not re.search(r"\bnan\b", text, flags=re.I)


def test_report_of_lopsided_noise_says_why_the_curve_is_not_drawn(tmp_path, capsys):
    """sigma_y / sigma_x = 1e310 overflows a float: the report is still written, the sigma curve says why it is absent."""
    out = tmp_path / "r.html"
    args = ["report", "--n", "60000", "--l", "256", "--T", "1000", "--sigma-x", "1e-10", "--sigma-y", "1e300"]
    assert main([*args, "--delta", "1e-5", "--out", str(out)]) == 0
    assert "would put σy beyond the floating-point range" in out.read_text()


def test_report_of_uniform_mixing_on_clipped_records(tmp_path, capsys):
    """--model dpmix-clip: the headline and statement are rdp-wor's on records clipped to ||x||, ||y|| <= 1; with
    class-centric mixing no accountant analyses that release, and the report says so (not "too little noise")."""
    out = tmp_path / "r.html"
    assert main([*ARGS, "--model", "dpmix-clip", "--out", str(out)]) == 0
    page = re.sub(r"<script.*?</script>", "", out.read_text(), flags=re.S)
    assert "rdp-wor (clipped x, y)" in page and "(x: ||.||_2 &lt;= 1, y: ||.||_2 &lt;= 1)" in page
    assert "<th>clip_records</th><td>True</td>" in page  # the settings are the headline release's
    cc = tmp_path / "cc.html"
    assert main([*ARGS, "--model", "dpmix-clip", "--classes", "10", "--out", str(cc)]) == 0
    assert "No headline: no accountant analyses this release model" in cc.read_text()


def test_report_of_an_uncovered_release_says_why_it_has_no_headline(tmp_path, capsys):
    """Private normalisation: no upper bound, and the reason is that, not "too little noise"."""
    out = tmp_path / "r.html"
    args = [*ARGS, "--classes", "10", "--clip", "1", "--private-normalisation", "--model", "dpcda"]
    assert main([*args, "--out", str(out)]) == 0
    text = re.sub(r"<script.*?</script>", "", out.read_text(), flags=re.S)
    assert "No ε is an upper bound for this release (not covered: normalisation constants computed" in text
    assert "too little noise" not in text


# --- report --release FILE: the what-if read back from a release's card -----------------------------------


def _card(tmp_path, name: str, **config) -> tuple:
    """A release of the embedded sample written by synthesize's own code, and its card as stored."""
    import json

    from dpmix_core.data import load_embedded
    from dpmix_core.synthesis.export import write_release
    from dpmix_core.synthesis.pipeline import SynthesisConfig, synthesize

    data_path, card_path = write_release(synthesize(SynthesisConfig(**config), load_embedded()), tmp_path / name)
    return data_path, json.loads(card_path.read_text())


@pytest.mark.parametrize(
    ("config", "model"),
    [
        (dict(mechanism="dpmix", l=8, T=50, sigma_x=0.5), "dpmix"),
        (dict(mechanism="dpmix", l=8, T=50, sigma_x=0.5, preprocessing="clip"), "dpmix-clip"),
        (dict(mechanism="class-centric", l=8, T=50, sigma_x=0.5, preprocessing="zscore", hard_labels=True), "dpcda"),
        (
            dict(mechanism="class-centric", l=8, T=50, sigma_x=0.5, preprocessing="zscore", protect_labels=False),
            "dpcda",
        ),
        (dict(mechanism="class-centric", l=8, T=50, sigma_x=0.5), "dpmix"),
        (dict(mechanism="poisson", l=8, T=500, sigma_x=0.8), "poisson"),
    ],
)
def test_the_card_read_back_is_the_release_it_describes(tmp_path, config, model):
    """The setting rebuilt from a card gives, under its release model, the card's tightest rigorous epsilon (the
    card's epsilons were computed on the mechanism's own release description, not from a setting)."""
    from dpmix_core.views.release_card import card_setting
    from dpmix_core.views.reports import release_reading

    _, card = _card(tmp_path, "r.npz", **config)
    setting, found = card_setting(card)
    reading = release_reading(setting, card["delta"], found, with_curves=False)
    bounds = [(e["epsilon"], e["accountant"]) for e in card["epsilons"] if e["upper_bound"]]
    assert found == model and (reading.epsilon, reading.accountant) == min(bounds)
    assert (setting.n, setting.l, setting.T) == (card["release"]["n"], card["release"]["l"], card["release"]["T"])


@pytest.mark.parametrize(
    "config",
    [
        dict(mechanism="class-centric", l=8, T=50, sigma_x=0.5),
        dict(mechanism="dpmix", l=8, T=50, sigma_x=0.5),
        dict(mechanism="poisson", l=8, T=500, sigma_x=0.8, features="scattering"),
    ],
)
def test_the_accountant_pages_controls_keep_what_they_cannot_hold_from_a_loaded_card(tmp_path, config):
    """The page holds K equal classes and pixels; with_card_data gives back the card's own class sizes and feature
    transform while n, dx and the classes still match, and the controls' release once they do not."""
    from dpmix_core.privacy.accountants import equal_class_sizes
    from dpmix_core.views.release_card import card_setting, with_card_data

    _, card = _card(tmp_path, "r.npz", **config)
    setting, _ = card_setting(card)
    k = len(setting.class_sizes or ())
    controls = replace(
        setting,
        class_sizes=equal_class_sizes(setting.n, k) if k else None,
        feature_transform="pixels",
    )
    assert with_card_data(controls, setting) == (setting, True)
    bigger = replace(controls, n=2 * setting.n, class_sizes=equal_class_sizes(2 * setting.n, k) if k else None)
    for changed in (bigger, replace(controls, dx=controls.dx + 1)):
        assert with_card_data(changed, setting) == (changed, False)
    if k:  # class-centric: mixing across classes (or another K) is the controls' release
        assert with_card_data(replace(controls, class_sizes=None), setting)[1] is False
        fewer = replace(controls, class_sizes=equal_class_sizes(setting.n, k // 2))
        assert with_card_data(fewer, setting) == (fewer, False)


def test_report_of_a_release_file(tmp_path, capsys):
    data_path, card = _card(tmp_path, "mine.npz", mechanism="poisson", l=8, T=500, sigma_x=0.8)
    out = tmp_path / "r.html"
    assert main(["report", "--release", str(data_path), "--out", str(out)]) == 0
    assert "release model: poisson (from the card of" in capsys.readouterr().out
    page = out.read_text()
    assert "Privacy statement" in page and html.escape(card["statement"]) in page  # the card's own words
    assert "release_file" in page and "mine.npz" in page and "embedded" in page.lower()


def test_report_release_refuses_contradicting_options_and_edited_or_laplace_cards(tmp_path, capsys):
    import json

    data_path, card = _card(tmp_path, "mine.npz", mechanism="dpmix", l=8, T=50, sigma_x=0.5)
    assert main(["report", "--release", str(data_path), "--n", "5", "--out", str(tmp_path / "a.html")]) == 2
    card["release"]["sigma_x"] = card["parameters"]["sigma_x"] = 0.25  # edited: its epsilons no longer follow
    (tmp_path / "edited.card.json").write_text(json.dumps(card))
    assert main(["report", "--release", str(tmp_path / "edited.card.json"), "--out", str(tmp_path / "b.html")]) == 2
    laplace, _ = _card(tmp_path, "lap.npz", mechanism="label-laplace", label_epsilon=1.0)
    assert main(["report", "--release", str(laplace), "--out", str(tmp_path / "c.html")]) == 2
    assert main(["report", "--n", "5", "--out", str(tmp_path / "d.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("error:") for line in err)
    assert "drop --n" in err[0] and "does not verify" in err[1] and "not a mixing release" in err[2]
    assert "report needs --l, --T, --sigma-x" in err[3]
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".html") == []
