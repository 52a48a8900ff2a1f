"""One recording configuration, built once at the command line: below gpubench.cli no function takes the
parser's namespace (a parameter named `args` read as `args.<option>`, a `Namespace` annotation, or
`vars(args)`) and no module names argparse.Namespace. Read from the source with ast, function-level code
included. (gpubench.usage and the gate still import argparse for the types their options parse with:
ArgumentTypeError is how an option's value is refused.)"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

import pytest
from test_layout import modules

from gpubench.cli import recording_config
from gpubench.options import parser
from gpubench.record.config import RecordingConfig

ROOT = Path(__file__).resolve().parents[2]
CLI = "gpubench.cli"
# Modules that still read their command's options from the namespace: each entry must still do so (the test
# below says when one no longer does), and none may be added.
STILL_READ: dict[str, str] = {}  # a module allowed to read the namespace for now, and why (none is)


def namespace_uses(source: str) -> list[str]:
    """Where `source` imports argparse or treats a parameter as the parser's namespace."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] == "argparse"
            and any(a.name == "Namespace" for a in node.names)
        ):
            found.append(f"line {node.lineno}: from argparse import Namespace")
        elif isinstance(node, ast.Attribute) and node.attr == "Namespace" and ast.unparse(node.value) == "argparse":
            found.append(f"line {node.lineno}: argparse.Namespace")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            for p in params:
                if p.annotation is not None and "Namespace" in ast.unparse(p.annotation):
                    found.append(f"line {node.lineno}: parameter {p.arg}: {ast.unparse(p.annotation)}")
            names = {p.arg for p in params}
            if "args" in names:  # *args (a vararg) is a tuple, not the namespace
                body = node.body if isinstance(node.body, list) else [node.body]
                for sub in (n for b in body for n in ast.walk(b)):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "args":
                        found.append(f"line {sub.lineno}: args.{sub.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "vars"
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "args"
        ):
            found.append(f"line {node.lineno}: vars(args)")
    return found


def below_the_cli() -> dict[str, list[str]]:
    return {m: uses for m, path in sorted(modules().items()) if m != CLI and (uses := namespace_uses(path.read_text()))}


def test_no_function_below_the_cli_takes_the_parsers_namespace():
    assert {m: u for m, u in below_the_cli().items() if m not in STILL_READ} == {}


def test_the_modules_allowed_to_still_read_it_do_so():
    """An entry that no longer reads the namespace is removed from STILL_READ, so the list only shrinks."""
    assert set(STILL_READ) <= set(below_the_cli())


def test_every_module_imports():
    """Each module imports on its own (the check above reads the files; this loads them)."""
    for name in modules():
        if name.endswith("bootstrap.sitecustomize") or name == "gpubench.__main__":
            continue  # each runs something on import: the user's own sitecustomize, the command line
        importlib.import_module(name)


@pytest.mark.parametrize(
    "source,expected",
    [
        ("from argparse import Namespace\n", ["line 1: from argparse import Namespace"]),
        ("import argparse\nx = argparse.Namespace(out=None)\n", ["line 2: argparse.Namespace"]),
        ("import argparse\n\ndef number(text):\n    raise argparse.ArgumentTypeError(text)\n", []),
        ("def run(args):\n    return args.duration\n", ["line 2: args.duration"]),
        ("def run(opts, args) -> int:\n    x = 1\n    return vars(args)\n", ["line 3: vars(args)"]),
        ("def run(ns: 'argparse.Namespace'):\n    pass\n", ["line 1: parameter ns: 'argparse.Namespace'"]),
        ("def run(ns: Namespace):\n    pass\n", ["line 1: parameter ns: Namespace"]),
        ("f = lambda args: args.out\n", ["line 1: args.out"]),
        ("def call(fn, *args):\n    return fn(*args)\n", []),
        ("def hook(opt, args: tuple, kwargs: dict):\n    return args[0]\n", []),
    ],
)
def test_the_check_finds_what_was_planted(source, expected):
    assert namespace_uses(source) == expected


def test_each_verb_builds_one_configuration_from_its_options(tmp_path):
    run = recording_config(parser().parse_args(["run", "--interval", "0.2", "--no-smi", "--out", str(tmp_path)]))
    assert run == RecordingConfig(out=tmp_path, device=0, interval_s=0.2, smi=False, peaks=True)
    assert recording_config(parser().parse_args(["run", "--no-peaks", "--all-gpus"])).peaks is False
    watch = recording_config(parser().parse_args(["watch", "--profiling", "none", "--", "true"]))
    assert watch == RecordingConfig(device=None, profiling="none", peaks=False)
    assert recording_config(parser().parse_args(["watch", "--peaks", "--device", "1", "--", "true"])).peaks is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        watch.smi = False  # built once: nothing below changes it


NO_FLAG = {"command", "sources"}  # fields never set from the command line
SAMPLE = {
    "interval_s": ("0.25", 0.25),
    "device": ("3", 3),
    "out": ("somewhere", Path("somewhere")),
    "profiling": ("none", "none"),
    "price_per_gpu_hour": ("2.5", 2.5),
}  # a value each flag that takes one


def verb_flags(verb: str) -> dict:
    """Each field with a flag on `verb`, and that flag."""
    found = {}
    for f in dataclasses.fields(RecordingConfig):
        mine = [flag for flag in f.metadata.get("flags", ()) if verb in flag.verbs]
        assert len(mine) <= 1, (verb, f.name, [flag.name for flag in mine])
        found.update({f.name: flag for flag in mine})
    return found


def subparser(verb: str):
    return parser()._subparsers._group_actions[0].choices[verb]


@pytest.mark.parametrize("verb", ["run", "watch"])
def test_every_field_set_from_the_command_line_has_one_flag_that_sets_it(verb):
    flagged = {name for v in ("run", "watch") for name in verb_flags(v)}
    assert {f.name for f in dataclasses.fields(RecordingConfig)} - flagged == NO_FLAG
    default = recording_config(parser().parse_args([verb, "--", "true"] if verb == "watch" else [verb]))
    for name, flag in verb_flags(verb).items():
        actions = [a for a in subparser(verb)._actions if a.dest == name]
        assert [a.option_strings for a in actions] == [[flag.name]], name
        action = flag.options.get("action")
        text, value = SAMPLE[name] if action is None else (None, action == "store_true")
        argv = [verb, flag.name, *([text] if text is not None else []), *(["--", "true"] * (verb == "watch"))]
        config = recording_config(parser().parse_args(argv))
        assert getattr(config, name) == value != getattr(default, name), (verb, name)
        assert config == dataclasses.replace(default, **{name: value})  # that field and no other


@pytest.mark.parametrize("verb", ["run", "watch"])
def test_help_lists_each_flag_with_its_help_text(verb):
    """Squeezed of whitespace, as argparse wraps help at spaces and hyphens: the flag, its metavar, its help."""
    options = "".join(subparser(verb).format_help().split("options:")[1].split())
    for flag in verb_flags(verb).values():
        pattern = re.escape(flag.name) + r"(?:[A-Z]+|\{[^}]*\})?" + re.escape("".join(flag.help.split()))
        assert re.search(pattern, options), (verb, flag.name)


def test_a_configuration_out_of_range_is_refused():
    with pytest.raises(ValueError, match="profiling must be one of"):
        RecordingConfig(profiling="nsight")
    with pytest.raises(ValueError, match="interval_s must be positive"):
        RecordingConfig(interval_s=0)


def test_every_field_says_what_it_means():
    """A docstring under each field, as the module's source has it (dataclasses keep none at run time)."""
    tree = ast.parse((ROOT / "gpubench" / "record" / "config.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RecordingConfig")
    documented = {
        a.target.id
        for a, doc in zip(cls.body, cls.body[1:])
        if isinstance(a, ast.AnnAssign)
        and isinstance(doc, ast.Expr)
        and isinstance(doc.value, ast.Constant)
        and isinstance(doc.value.value, str)
    }
    assert documented == {f.name for f in dataclasses.fields(RecordingConfig)}
