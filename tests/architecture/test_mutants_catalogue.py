"""The mutation catalogue (benchmarks/mutants) still applies to the code it plants defects in:
each mutant's `find` text occurs exactly once in its file and the mutated file compiles. An
edit of a peer (a reformat included) that moves such a text fails here, not silently when the
catalogue is next run."""

from __future__ import annotations

from benchmarks.mutants.catalogue import load, problems


def test_every_mutant_applies_to_the_current_tree() -> None:
    mutants = load()
    assert mutants, "no mutant in benchmarks/mutants/*.toml"
    assert problems(mutants) == []
