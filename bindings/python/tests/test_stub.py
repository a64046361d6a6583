"""The typing stub (`runcore/__init__.pyi`) matches the module: the same public names, classes
with the same bases, methods and properties, and the same parameters (names, kinds, which have
defaults)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import runcore

STUB = Path(runcore.__file__).with_name("__init__.pyi")
TREE = ast.parse(STUB.read_text())


def stub_classes() -> dict:
    return {node.name: node for node in TREE.body if isinstance(node, ast.ClassDef)}


def is_typed_dict(node: ast.ClassDef) -> bool:
    return any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases)


def runtime_classes() -> dict:
    return {name: getattr(runcore, name) for name in runcore.__all__
            if isinstance(getattr(runcore, name), type)}


def test_the_stub_ships_with_the_package():
    assert STUB.is_file()
    assert STUB.with_name("py.typed").is_file()


def test_the_same_public_classes():
    stubbed = {name for name, node in stub_classes().items() if not is_typed_dict(node)}
    assert stubbed == set(runtime_classes())
    names = {n.target.id for n in TREE.body if isinstance(n, ast.AnnAssign)}
    assert "__version__" in names and isinstance(runcore.__version__, str)


def test_the_same_bases():
    for name, cls in runtime_classes().items():
        node = stub_classes()[name]
        bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        assert [b.__name__ for b in cls.__bases__] == (bases or ["object"]), name


def stub_members(node: ast.ClassDef) -> dict:
    return {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}


def runtime_members(cls: type) -> dict:
    members = {}
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in ("__iter__", "__next__", "__enter__", "__exit__"):
            continue
        members[name] = value
    return members


def test_the_same_methods_and_properties():
    for name, cls in runtime_classes().items():
        if issubclass(cls, BaseException):
            continue
        node = stub_classes()[name]
        stubbed = {n for n in stub_members(node) if n != "__init__"}
        assert stubbed == set(runtime_members(cls)), name
        for member, value in runtime_members(cls).items():
            decorators = {d.id for d in stub_members(node)[member].decorator_list
                          if isinstance(d, ast.Name)}
            is_property = inspect.isdatadescriptor(value)
            assert ("property" in decorators) == is_property, f"{name}.{member}"
            if isinstance(value, staticmethod):
                assert "staticmethod" in decorators, f"{name}.{member}"
            if isinstance(value, classmethod) or inspect.ismethod(getattr(cls, member)):
                assert "classmethod" in decorators, f"{name}.{member}"


def stub_params(fn: ast.FunctionDef) -> list:
    args = fn.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [(a.arg, "positional", d is not None) for a, d in zip(positional, defaults)]
    params += [(a.arg, "keyword", d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    if "staticmethod" not in decorators:
        params = params[1:]  # self / cls
    return params


def runtime_params(fn) -> list:
    out = []
    for p in inspect.signature(fn).parameters.values():
        kind = "keyword" if p.kind is p.KEYWORD_ONLY else "positional"
        out.append((p.name, kind, p.default is not p.empty))
    if out and out[0][0] in ("self", "cls"):
        out = out[1:]  # unbound methods show their receiver; bound class methods do not
    return out


def test_the_same_parameters():
    checked = 0
    for name, cls in runtime_classes().items():
        if issubclass(cls, BaseException):
            continue
        node = stub_classes()[name]
        for member, fn in stub_members(node).items():
            if member == "__init__":
                if "__init__" in stub_members(node) and cls.__text_signature__ is not None:
                    assert stub_params(fn) == runtime_params(cls), name
                    checked += 1
                continue
            value = getattr(cls, member)
            if isinstance(inspect.getattr_static(cls, member), property) or \
                    inspect.isdatadescriptor(inspect.getattr_static(cls, member)):
                continue
            assert stub_params(fn) == runtime_params(value), f"{name}.{member}"
            checked += 1
    assert checked > 40


def test_exceptions_declare_the_attributes_they_carry():
    agent = runcore.Agent()
    run_id = agent.prompt("x")
    list(agent.drain())
    with __import__("pytest").raises(runcore.BusyError) as e:
        agent.prompt("y")
    for cls in type(e.value).__mro__:
        node = stub_classes().get(cls.__name__)
        if node is None:
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign):
                assert hasattr(e.value, item.target.id), (cls.__name__, item.target.id)
    assert e.value.active_run == run_id
