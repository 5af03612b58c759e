# SPDX-License-Identifier: Apache-2.0
"""kiln.ir from Python: the text format both ways, functions, attributes, structural equality."""
import pytest

import kiln
from conftest import ADD_MODULE, MLP, TEST_MODEL

ir = kiln.ir


def test_text_round_trip():
    mod = ir.IRModule.from_text(MLP)
    again = ir.parse(str(mod))
    assert ir.structural_equal(mod, again)
    assert ir.structural_hash(mod) == ir.structural_hash(again)
    assert str(again) == str(mod)
    assert mod.script() == str(mod)
    assert not mod.same_as(again) and mod != again and mod == mod


def test_structural_inequality_and_assert():
    a, b = ir.parse(ADD_MODULE), ir.parse(TEST_MODEL)
    assert not ir.structural_equal(a, b)
    ir.assert_structural_equal(a, ir.parse(ADD_MODULE))
    with pytest.raises(ValueError, match="the modules differ; first difference at line"):
        ir.assert_structural_equal(a, b)


def test_functions_params_and_attrs():
    mod = ir.parse(MLP)
    assert len(mod) == 1 and "main" in mod and "other" not in mod
    assert mod.get_global_vars() == ["main"]
    f = mod["main"]
    assert f.kind == "function"
    assert [p.name_hint for p in f.params] == ["x", "w1", "b1", "w2", "b2"]
    assert f.params[0].type == 'R.Tensor((n, 16), "float32")'
    assert f.ret_type == 'R.Tensor((n, 4), "float32")'
    g = f.with_attr("global_symbol", "main").with_attr("sizes", [1, 2]).with_attr("scale", 0.5)
    assert g.attrs == {"global_symbol": "main", "sizes": [1, 2], "scale": 0.5}
    assert f.attrs == {}  # immutable: with_attr made a copy
    with pytest.raises(TypeError, match="attribute 'bad' cannot hold a object"):
        f.with_attr("bad", object())
    two = mod.with_function("copy", g)
    assert two.get_global_vars() == ["main", "copy"]
    assert [name for name, _ in two.functions_items()] == ["main", "copy"]
    assert two.without_function("copy").get_global_vars() == ["main"]
    with pytest.raises(KeyError, match="no function named 'nope' \\(the module has: main\\)"):
        mod["nope"]
    with pytest.raises(kiln.KilnError, match="no function named 'nope' to remove"):
        mod.without_function("nope")
    assert "def copy(" in two["copy"].script("copy")
    assert mod.with_attr("k", "v").attrs == {"k": "v"}
    assert mod.verify() == []


def test_parse_errors_give_line_and_column():
    bad = ADD_MODULE.replace("R.add(x, y)", "R.add(x y)")
    with pytest.raises(kiln.ParseError) as info:
        ir.parse(bad)
    assert "line 6, column" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, kiln.KilnError)
    with pytest.raises(kiln.ParseError):
        ir.parse("")
    with pytest.raises(kiln.KilnError):
        ir.parse(ADD_MODULE.replace("R.add", "R.no_such_operator"))


def test_load(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text(ADD_MODULE)
    assert ir.structural_equal(ir.load(str(path)), ir.parse(ADD_MODULE))


BIG_CONSTANT = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((20,), "float32")) -> R.Tensor((20,), "float32"):
        a: R.Tensor((20,), "float32") = R.add(x, R.const([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0], "float32"))
        b: R.Tensor((20,), "float32") = R.multiply(a, R.const(2.0, "float32"))
        return b
'''


def test_printing_elides_large_constants_as_tvm_does(capsys):
    mod = ir.parse(BIG_CONSTANT)
    text = str(mod)
    assert 'R.const(meta[0], "float32", shape=(20,))' in text
    assert 'R.const(2.0, "float32")' in text  # small constants stay
    assert mod.script() == text
    full = mod.script(show_meta=True)
    assert "19.0" in full and "meta[" not in full
    assert ir.structural_equal(ir.parse(full), mod)
    with pytest.raises(kiln.ParseError, match="constants elided: meta\\[0\\] stands for a float32 of shape \\(20,\\) constant"):
        ir.parse(text)
    mod.show()
    assert capsys.readouterr().out == text
    mod.show(show_meta=True)
    assert capsys.readouterr().out == full
    assert "meta[0]" in str(mod["main"]) and "19.0" in mod["main"].script(show_meta=True)


def test_save_writes_every_constant(tmp_path):
    mod = ir.parse(BIG_CONSTANT)
    ir.save(mod, tmp_path / "m.kir")
    assert ir.structural_equal(ir.load(tmp_path / "m.kir"), mod)


def test_to_dot():
    dot = ir.parse(MLP).to_dot()
    assert dot.startswith("digraph kiln {")
    assert 'label="@main"' in dot
    assert "R.matmul" in dot
    assert dot.rstrip().endswith("}")
