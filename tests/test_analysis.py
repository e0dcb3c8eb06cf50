"""The measurements of a model's output: kinds of mistakes, accuracy by length, where heads attend."""

import pytest
import torch

from minitransformer.analysis import (
    accuracy_by_digits,
    attention_specificity,
    attention_to,
    classify_mistake,
    mistake_kind,
    mistakes_table,
    stack_maps,
    top_heads,
)


def test_mistakes_are_classified_word_by_word():
    assert classify_mistake("one thousand two", "one thousand three", "en") == "“two” instead of “three”"
    assert classify_mistake("eight thousand eight", "eight thousand", "es") == "sobra «eight»"
    assert classify_mistake("forty", "forty-two thousand forty", "en") == "missing “forty-two thousand”"
    assert [
        mistake_kind(p, "one thousand five")
        for p in ("one thousand", "one thousand five five", "two thousand five", "forty-two five", "two hundred five")
    ] == ["missing", "extra", "changed", "changed_count", "changed"]
    # «changed» keeps the number of words: two words for three is another kind
    assert mistake_kind("forty-two thousand", "forty thousand two") == "changed_count"
    assert classify_mistake("forty-two five", "one thousand five", "en") == "“forty-two” instead of “one thousand”"


def test_accuracy_by_digits_counts_right_and_total():
    assert accuracy_by_digits([5, 12, 13, 100], [True, True, False, True]) == {1: (1, 1), 2: (1, 2), 3: (1, 1)}
    by_digits = accuracy_by_digits([100, 12, 5, 13], [True, True, True, False])  # in any order: sorted by digits
    assert list(by_digits) == [1, 2, 3] and by_digits == {1: (1, 1), 2: (1, 2), 3: (1, 1)}


def test_mistakes_table():
    table = mistakes_table(
        [(1503, "mil quinientos tres", "five hundred three", "one thousand five hundred three")], "en"
    )
    assert "1 503" in table and "missing “one thousand”" in table and table.splitlines()[0].startswith("number")
    assert mistakes_table([], "es") == "(ningún error)"


def test_stack_maps_takes_batched_or_single_maps():
    maps = [torch.rand(2, 3, 5, 5) for _ in range(4)]  # L=4 maps of (B, H, T, S)
    torch.testing.assert_close(stack_maps(maps, 1), torch.stack([m[1] for m in maps]))
    torch.testing.assert_close(stack_maps([m[1] for m in maps]), stack_maps(maps, 1))  # (H, T, S) maps
    with pytest.raises(ValueError, match=r"\(H, T, S\)"):
        stack_maps([torch.rand(5, 5)])
    with pytest.raises(ValueError):
        stack_maps([])


def test_attention_to_and_top_heads():
    torch.manual_seed(2)
    maps = [torch.softmax(torch.randn(1, 3, 5, 5), -1) for _ in range(4)]  # L=4, H=3
    stacked = torch.stack([m[0] for m in maps])  # (L, H, T, S)
    w = attention_to(maps, 2, 4)
    torch.testing.assert_close(w, stacked[:, :, 2, 4])
    both = attention_to(maps, 2, [4, 0])
    assert both.shape == (4, 3, 2)
    torch.testing.assert_close(both[..., 1], stacked[:, :, 2, 0])
    top = top_heads(w, 3)
    _, flat = w.flatten().topk(3)
    assert top == [divmod(int(i), 3) for i in flat]
    assert top_heads(torch.tensor([[0.5, 0.9], [0.9, 0.1]]), 2) == [(0, 1), (1, 0)]  # ties: lower layer first


def test_attention_specificity_against_a_column_head():
    """Head 0 makes every token look at key 1 (a column); head 1 only from query 3."""
    T = 5
    column = torch.zeros(T, T)
    column[:, 1] = 1.0
    specific = torch.full((T, T), 1.0 / T)
    specific[3] = 0.0
    specific[3, 1] = 1.0
    maps = [torch.stack([column, specific])[None]]  # one layer (1, H=2, T, T)
    spec, baseline = attention_specificity(maps, query=3, key=1)
    assert spec.shape == baseline.shape == (1, 2)
    torch.testing.assert_close(baseline, torch.tensor([[1.0, 1.0 / T]]))
    torch.testing.assert_close(spec, torch.tensor([[0.0, 1.0 - 1.0 / T]]))
