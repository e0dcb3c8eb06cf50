"""bertviz adapters (minitransformer.viz.bertviz), static head figures (minitransformer.viz.heads) and the offline page."""

from __future__ import annotations

import configparser
import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
import torch  # noqa: E402

from minitransformer.attention import scaled_dot_product_attention  # noqa: E402
from minitransformer.exercises.heads import check_attention_row, check_strongest_head  # noqa: E402
from minitransformer.model import Encoder, Transformer, TransformerConfig  # noqa: E402
from minitransformer.viz import bertviz as views  # noqa: E402
from minitransformer.viz import heads  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SRC = ["cuarenta", "y", "dos", "</s>"]
TGT = ["<s>", "forty", "two"]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=12, tgt_vocab_size=12, d_model=16, n_heads=4, d_ff=32, n_layers=2, dropout=0.3
    )
    return Transformer(config)


@pytest.fixture(scope="module")
def batch():
    # Two examples; the first has one padding token (id 0) at the end of the source.
    src = torch.tensor([[3, 4, 5, 2, 0], [6, 7, 8, 9, 2]])
    tgt = torch.tensor([[1, 10, 11], [1, 4, 5]])
    return src, tgt


def test_translator_attention_is_the_models_own_eval_forward(model, batch):
    src, tgt = batch
    model.train()
    maps = heads.translator_attention(model, src, tgt)
    assert model.training, "the model's mode must be restored"
    model.eval()
    _, ref = model(src, tgt, return_attention=True)
    model.train()
    for ours, theirs in zip(maps.encoder + maps.decoder_self + maps.cross, ref.encoder + ref.decoder_self + ref.cross):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    assert [tuple(m.shape) for m in maps.cross] == [(2, 4, 3, 5)] * 2


def test_bertviz_arguments_encoder_decoder(model, batch):
    src, tgt = batch
    maps = heads.translator_attention(model, src, tgt)
    kw = views.bertviz_arguments(maps, src_tokens=SRC, tgt_tokens=TGT, index=0)
    assert kw["encoder_tokens"] == SRC and kw["decoder_tokens"] == TGT
    assert [tuple(w.shape) for w in kw["encoder_attention"]] == [(1, 4, 4, 4)] * 2
    assert [tuple(w.shape) for w in kw["decoder_attention"]] == [(1, 4, 3, 3)] * 2
    assert [tuple(w.shape) for w in kw["cross_attention"]] == [(1, 4, 3, 4)] * 2
    for ours, full in zip(kw["cross_attention"], maps.cross):
        assert ours.dtype == torch.float64
        torch.testing.assert_close(ours, full[0:1, :, :3, :4].double(), rtol=0, atol=5e-4)
        # rounded to 3 decimals
        torch.testing.assert_close(ours * 1000, (ours * 1000).round(), rtol=0, atol=1e-9)
    # Cutting the padded key loses no attention: the mask gave it weight 0.
    for w in kw["encoder_attention"] + kw["cross_attention"]:
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), rtol=0, atol=3e-3)
    # The second example of the batch.
    kw1 = views.bertviz_arguments(maps, src_tokens=SRC + ["x"], tgt_tokens=TGT, index=1, decimals=None)
    torch.testing.assert_close(kw1["cross_attention"][1], maps.cross[1][1:2].double(), rtol=0, atol=0)


def test_bertviz_arguments_self_attention_and_errors():
    torch.manual_seed(1)
    config = TransformerConfig(
        src_vocab_size=10, tgt_vocab_size=10, d_model=8, n_heads=2, d_ff=16, n_layers=3, dropout=0.0
    )
    encoder = Encoder(config).eval()
    _, maps = encoder(torch.tensor([[1, 2, 3]]))
    kw = views.bertviz_arguments(maps, ["a", "b", "c"], decimals=None)
    assert set(kw) == {"attention", "tokens"}
    for ours, theirs in zip(kw["attention"], maps):
        torch.testing.assert_close(ours, theirs.double(), rtol=0, atol=0)
    # (H, T, S) maps are accepted too
    kw3 = views.bertviz_arguments([m[0] for m in maps], ["a", "b", "c"], decimals=None)
    torch.testing.assert_close(kw3["attention"][2], kw["attention"][2])
    with pytest.raises(ValueError, match="smaller than the tokens"):
        views.bertviz_arguments(maps, ["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="tokens"):
        views.bertviz_arguments(maps)
    with pytest.raises(ValueError, match="outside the batch"):
        views.bertviz_arguments(maps, ["a"], index=3)


def test_bertviz_arguments_needs_both_token_lists(model, batch):
    maps = heads.translator_attention(model, *batch)
    with pytest.raises(ValueError, match="src_tokens and tgt_tokens"):
        views.bertviz_arguments(maps, src_tokens=SRC)
    with pytest.raises(ValueError, match="src_tokens and tgt_tokens"):
        views.bertviz_arguments(maps, SRC)


def _params(html: str) -> dict:
    # bertviz writes `const params = {...}; // HACK...`
    return json.loads(re.search(r"const params = (\{.*?\}); ", html, re.S).group(1))


def test_head_and_model_view_embed_our_rounded_maps(model, batch):
    maps = heads.translator_attention(model, *batch)
    html = views.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return").data
    params = _params(html)
    names = [d["name"] for d in params["attention"]]
    assert names == ["Encoder", "Decoder", "Cross"]
    cross = params["attention"][2]
    assert cross["left_text"] == TGT and cross["right_text"] == SRC
    want = maps.cross[1][0, :, :3, :4].double().round(decimals=3)
    assert torch.tensor(cross["attn"][1], dtype=torch.float64).equal(want)
    # small and stable: no number longer than "0.123"
    numbers = re.findall(r"\d+\.\d+", json.dumps(cross["attn"]))
    assert numbers and max(len(n) for n in numbers) <= 5
    mv = views.model_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return").data
    assert _params(mv)["display_mode"] == "light"
    assert len(_params(mv)["attention"]) == 3


def test_view_is_bertvizs_own_display(model, batch, monkeypatch):
    """In a notebook our views are bertviz's own: the require.js tag, the <div> and the script."""
    import sys

    shown = []
    monkeypatch.setattr(sys.modules["bertviz.head_view"], "display", shown.append)
    maps = heads.translator_attention(model, *batch)
    assert views.head_view(maps, src_tokens=SRC, tgt_tokens=TGT) is None
    assert [type(o).__name__ for o in shown] == ["HTML", "HTML", "Javascript"]
    assert shown[1].data.strip().startswith('<div id="bertviz-')
    assert "requirejs(['jquery', 'd3']" in shown[2].data
    assert _params(shown[2].data)["attention"][2]["left_text"] == TGT


def test_bertviz_ids_are_sanitised_for_nbval(model, batch):
    """The element id bertviz draws into must match the sanitiser of the stored outputs."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests" / "nbval_sanitize.cfg")
    pattern = re.compile(cfg["bertviz element ids"]["regex"])
    maps = heads.translator_attention(model, *batch)
    a = views.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return").data
    b = views.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return").data
    assert a != b  # a fresh random id each time ...
    assert pattern.sub("bertviz-ID", a) == pattern.sub("bertviz-ID", b)  # ... and nothing else differs
    assert "bertviz-ID" in pattern.sub("bertviz-ID", a)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_static_figures(model, batch, lang):
    maps = heads.translator_attention(model, *batch)
    fig = heads.plot_head_grid(maps.cross, SRC, TGT, lang=lang, title="x")
    assert len(fig.axes) == 2 * 4 + 1  # layers × heads + colour bar
    labels = [t.get_text() for t in fig.axes[4].get_xticklabels()]
    assert labels == SRC
    assert fig.axes[0].get_ylabel() == ("capa 0" if lang == "es" else "layer 0")
    fig = heads.plot_head_grid(maps.encoder, SRC, pairs=[(1, 2), (0, 3)], lang=lang)
    assert [ax.get_title() for ax in fig.axes[:2]] == (
        ["capa 1, cabeza 2", "capa 0, cabeza 3"] if lang == "es" else ["layer 1, head 2", "layer 0, head 3"]
    )
    assert fig.axes[0].images[0].get_array().tolist() == maps.encoder[1][0, 2, :4, :4].tolist()
    fig = heads.plot_head_grid(maps.encoder, SRC, layers=[1], heads=[0, 3], lang=lang)
    assert [ax.get_title() for ax in fig.axes[:2]] == (
        ["cabeza 0", "cabeza 3"] if lang == "es" else ["head 0", "head 3"]
    )

    cross = maps.cross[-1][0].mean(0)  # (T, S)
    fig = heads.plot_alignment(cross, SRC, TGT, lang=lang)
    texts = [t.get_text() for t in fig.axes[1].texts]
    expected = [f"{v:.2f}" for v in cross[:3, :4].flatten().tolist()]
    assert texts == (expected if lang == "en" else [t.replace(".", ",") for t in expected])  # decimal comma in Spanish
    fig = heads.plot_alignment([cross, cross], [SRC, SRC[:2]], [TGT, TGT], titles=["a", "b"], lang=lang)
    assert len(fig.axes) == 5 and fig.axes[0].get_title(loc="left") == "a"

    values = torch.rand(2, 3)
    fig = heads.plot_head_scores([values, values / 2], titles=["p", "q"], mark=[(1, 2)], lang=lang)
    assert len(fig.axes[0].patches) == 1
    assert fig.axes[0].get_xlabel() == ("cabeza" if lang == "es" else "head")


def test_head_scores_of_both_signs_get_a_scale_centred_on_zero():
    positive = heads.plot_head_scores(torch.tensor([[0.5, 0.2], [0.0, 0.1]]), lang="en")
    image = positive.axes[0].images[0]
    assert (image.norm.vmin, image.norm.vmax) == (0.0, 0.5)
    both = heads.plot_head_scores(torch.tensor([[0.5, -0.2], [-0.004, 0.1]]), lang="en")
    image = both.axes[0].images[0]
    assert (image.norm.vmin, image.norm.vmax) == (-0.5, 0.5)
    assert image.cmap(image.norm(-0.2)) != image.cmap(image.norm(0.0))  # a negative value never looks like 0
    texts = [t.get_text() for t in both.axes[0].texts]
    assert texts == ["0.50", "-0.20", "0.00", "0.10"]  # -0.004 is written 0.00, not -0.00
    spanish = heads.plot_head_scores(torch.tensor([[0.5, -0.2], [-0.004, 0.1]]), lang="es")
    assert [t.get_text() for t in spanish.axes[0].texts] == ["0,50", "-0,20", "0,00", "0,10"]


def test_score_breakdown_matches_attention():
    torch.manual_seed(3)
    q, k = torch.randn(1, 8), torch.randn(5, 8)
    _, w = scaled_dot_product_attention(q, k, torch.zeros(5, 1))
    fig = heads.plot_score_breakdown(q[0], k, list("abcde"), "it", lang="en")
    ax_scores, ax_weights = fig.axes[2], fig.axes[3]
    bars = torch.tensor([p.get_width() for p in ax_weights.patches], dtype=torch.float32)
    torch.testing.assert_close(bars, w[0], rtol=0, atol=1e-6)
    scores = torch.tensor([p.get_width() for p in ax_scores.patches], dtype=torch.float32)
    torch.testing.assert_close(scores, (k @ q[0]) / math.sqrt(8), rtol=0, atol=1e-5)
    with pytest.raises(ValueError):
        heads.plot_score_breakdown(q[0], k, list("abc"), "it")


def test_offline_scripts_come_from_installed_packages():
    files = views.script_files()
    assert files is not None, "install the course's 'lab' extra (mpld3, nbclassic)"
    assert files["d3"].read_text(encoding="utf-8").startswith("// https://d3js.org v5.")
    page = views.offline_scripts().data
    code = {name: path.read_text(encoding="utf-8").replace("</script", "<\\/script") for name, path in files.items()}
    # d3 and jQuery run with the AMD loader hidden, then require.js, then the two modules bertviz asks for
    order = [
        page.index("(function (define, module, exports) {"),
        page.index(code["d3"]),
        page.index(code["jquery"]),
        page.index("}).call(window);\n"),
        page.index(code["requirejs"]),
        page.index('window.define("d3", [], function () { return window.d3; });'),
        page.index('window.define("jquery", [], function () { return window.jQuery; });'),
    ]
    assert order == sorted(order)
    assert type(views.offline_scripts()).__name__ == "Javascript"  # run in order with bertviz's views
    assert "cdnjs" not in page and "</script" not in page


@pytest.mark.parametrize("lang", ["es", "en"])
def test_offline_scripts_without_the_packages(monkeypatch, lang):
    from minitransformer import i18n

    monkeypatch.setattr(views, "SCRIPTS", {"d3": ("no_such_package_here", "d3.js")})
    assert views.script_files() is None
    monkeypatch.setattr(i18n, "_language", lang)
    note = views.offline_scripts().data
    assert "<script" not in note
    assert ("cargará" if lang == "es" else "will load") in note


def test_write_offline_page(model, batch, tmp_path):
    maps = heads.translator_attention(model, *batch)
    view = views.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return")
    page = views.write_offline_page(view, tmp_path / "sub" / "h.html").read_text(encoding="utf-8")
    assert page.index(f"<script>\n{views.offline_scripts().data}\n</script>") < page.index(view.data)  # view unchanged
    with pytest.raises(ValueError):
        views.write_offline_page(3, tmp_path / "x.html")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_check_strongest_head(lang):
    def right(maps, query, key):
        w = torch.stack([m[0, :, query, key] for m in maps])  # (L, H)
        return divmod(int(w.argmax()), w.size(1))

    def swapped(maps, query, key):
        return right(maps, query, key)[::-1]

    def transposed(maps, query, key):
        return right(maps, key, query)

    def flat(maps, query, key):
        return int(torch.stack([m[0, :, query, key] for m in maps]).argmax())

    def unfinished(maps, query, key):
        raise NotImplementedError

    assert check_strongest_head(right, lang=lang)
    for wrong, hint in [
        (swapped, "head_swapped"),
        (transposed, "head_key_to_query"),
        (flat, "head_single_number"),
        (unfinished, "not_written"),
    ]:
        fb = check_strongest_head(wrong, lang=lang)
        assert not fb and fb.hint == hint, str(fb)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_check_attention_row(lang):
    def right(q, k):
        return torch.softmax(k @ q / math.sqrt(q.size(0)), -1)

    cases = [
        (lambda q, k: torch.softmax(k @ q, -1), "row_no_scale"),
        (lambda q, k: torch.softmax(k @ q / q.size(0), -1), "row_scale_d_head"),
        (lambda q, k: k @ q / math.sqrt(q.size(0)), "row_no_softmax"),
        (lambda q, k: torch.softmax((k @ q / math.sqrt(q.size(0)))[None], 0), "row_shape"),
        (lambda q, k: None, "returns_none"),
    ]
    assert check_attention_row(right, lang=lang)
    for wrong, hint in cases:
        fb = check_attention_row(wrong, lang=lang)
        assert not fb and fb.hint == hint, str(fb)


def test_offline_page_without_the_packages_holds_the_note_not_a_broken_script(model, batch, tmp_path, monkeypatch):
    monkeypatch.setattr(views, "script_files", lambda: None)
    maps = heads.translator_attention(model, *batch)
    view = views.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return")
    page = views.write_offline_page(view, tmp_path / "h.html").read_text(encoding="utf-8")
    note = views.offline_scripts().data
    assert note.startswith("<p>") and note in page and f"<script>\n{note}" not in page
