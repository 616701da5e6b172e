"""Pure formulas from the papers, one module per idea; no state, no I/O."""
