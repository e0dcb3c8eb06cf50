"""The measurements of a translator's output: kinds of mistakes, accuracy by length."""

from minitransformer.analysis import accuracy_by_digits, classify_mistake, mistake_kind, mistakes_table


def test_mistakes_are_classified_word_by_word():
    assert classify_mistake("one thousand two", "one thousand three", "en") == "“two” instead of “three”"
    assert classify_mistake("eight thousand eight", "eight thousand", "es") == "sobra «eight»"
    assert classify_mistake("forty", "forty-two thousand forty", "en") == "missing “forty-two thousand”"
    assert [
        mistake_kind(p, "one thousand five") for p in ("one thousand", "one thousand five five", "two thousand five")
    ] == ["missing", "extra", "changed"]


def test_accuracy_by_digits_counts_right_and_total():
    assert accuracy_by_digits([5, 12, 13, 100], [True, True, False, True]) == {1: (1, 1), 2: (1, 2), 3: (1, 1)}


def test_mistakes_table():
    table = mistakes_table(
        [(1503, "mil quinientos tres", "five hundred three", "one thousand five hundred three")], "en"
    )
    assert "1 503" in table and "missing “one thousand”" in table and table.splitlines()[0].startswith("number")
    assert mistakes_table([], "es") == "(ningún error)"
