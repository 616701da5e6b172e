def test_published_reference_points_are_drawn_as_not_ours_and_get_no_verdict():
    import pandas as pd
    import pytest

    from dpmix_core.experiments.presets import PRESETS
    from dpmix_core.experiments.spec import Published, load_spec
    from dpmix_core.experiments.trade_offs import REFERENCE_PREFIX, published_comparison, trade_off_figure

    spec = PRESETS["all-methods"]
    refs = [p for p in spec.published if p.reference]
    assert {p.series for p in refs} == {"DP diffusion model", "DP-SGD, ScatterNet + linear"}
    assert load_spec(spec.to_dict()).published == spec.published  # the flag survives a stored spec
    plain = Published("s", 1.0, 0.9, "paper")
    assert "reference" not in plain.to_dict()  # specs stored before the flag keep their identity
    agg = pd.DataFrame(
        {
            "label": ["s"],
            "axis_value": [1.0],
            "test_accuracy_mean": [0.91],
            "test_accuracy_std": [0.0],
            "test_accuracy_count": [1],
        }
    )
    table = published_comparison(agg, (plain, *refs))
    assert list(table["series"]) == ["s"]  # references never get a verdict
    fig = trade_off_figure(agg, "target_epsilon", published=(plain, *refs))
    names = [t.name for t in fig.data]
    assert f"{REFERENCE_PREFIX}DP diffusion model" in names and "published — s" in names
    with pytest.raises(ValueError, match="reference"):
        Published("s", 1.0, 0.9, reference="yes")
