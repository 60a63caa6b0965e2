"""ROUGE-L scoring: exact values on hand-checked cases (F = 2PR / (P + R) from the LCS)."""

import pytest

from kv_context_env.sim.scoring import mean_rouge_l, rouge_l


def test_identical_is_one_and_disjoint_is_zero():
    assert rouge_l("the cat sat on the mat", "the cat sat on the mat") == 1.0
    assert rouge_l("blue whale", "red fox jumps") == 0.0
    assert rouge_l("", "red fox") == 0.0
    assert rouge_l("red fox", "") == 0.0


def test_partial_overlap_matches_the_lcs_formula():
    # prediction: the cat sat on the mat (6)   reference: the cat lay on a mat (6)
    # LCS = the cat on mat = 4 -> P = R = 4/6 -> F = 2/3
    assert rouge_l("the cat sat on the mat", "the cat lay on a mat") == pytest.approx(2 / 3)
    # prediction: blue whale swims (3)   reference: the blue whale swims deep in the ocean (8)
    # LCS = 3 -> P = 1, R = 3/8 -> F = 2 * 3/8 / (11/8) = 6/11
    assert rouge_l("blue whale swims", "the blue whale swims deep in the ocean") == pytest.approx(
        6 / 11
    )
    # Order matters to P and R but F is symmetric.
    assert rouge_l("the blue whale swims deep in the ocean", "blue whale swims") == pytest.approx(
        6 / 11
    )


def test_case_punctuation_and_stemming_are_normalised():
    # "Swimming." stems to "swim" like "swims"; case and punctuation are dropped.
    assert rouge_l("Whales, swimming.", "whale swims") == 1.0
    # Order is a subsequence, not a bag: reversed 3 tokens share an LCS of 1 -> F = 1/3.
    assert rouge_l("red green blue", "blue green red") == pytest.approx(1 / 3)


def test_mean_rouge_l():
    pairs = [("a b", "a b"), ("x", "y"), ("the cat sat on the mat", "the cat lay on a mat")]
    assert mean_rouge_l(pairs) == pytest.approx((1.0 + 0.0 + 2 / 3) / 3)
    assert mean_rouge_l(iter(pairs[:1])) == 1.0
    with pytest.raises(ValueError, match="at least one"):
        mean_rouge_l([])
