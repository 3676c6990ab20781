"""Table-driven translation of one TF1 call into a Keras constructor call.

A ``CallSpec`` names the Keras target, the TF1 positional signature, and what happens to
each TF1 argument: renamed, dropped (no meaning in TF2), refused, or a TF1 default that
Keras does not share and that must therefore be written out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Unsupported


@dataclass(frozen=True)
class CallSpec:
    #: Keras target, relative to ``tf.`` (``"keras.optimizers.Adam"``).
    keras: str
    #: TF1 parameter names in positional order.
    signature: tuple[str, ...]
    #: TF1 name -> Keras name, for parameters whose name changed.
    rename: dict[str, str] = field(default_factory=dict)
    #: Keras name -> source text of the TF1 default, written out when the call omits it.
    explicit: dict[str, str] = field(default_factory=dict)
    #: TF1 parameters that mean nothing in TF2 (``use_locking``): dropped.
    dropped: frozenset[str] = frozenset()
    #: TF1 parameters that Keras cannot honour here: refused, with the reason.
    refused: dict[str, str] = field(default_factory=dict)
    #: TF1 parameters the caller handles itself (not passed to the Keras constructor).
    consumed: frozenset[str] = frozenset()
    #: Keras keyword arguments always added (``from_logits=True``), as source text.
    extra: dict[str, str] = field(default_factory=dict)


def bind(call: cst.Call, signature: tuple[str, ...]) -> dict[str, cst.Arg]:
    """TF1 parameter name -> argument, for positional and keyword arguments."""
    bound: dict[str, cst.Arg] = {}
    for index, arg in enumerate(call.args):
        if arg.star:
            raise Unsupported("arguments passed with * or ** cannot be translated", arg)
        if arg.keyword is None:
            if index >= len(signature):
                raise Unsupported("more positional arguments than the TF1 signature has", arg)
            bound[signature[index]] = arg
        else:
            bound[arg.keyword.value] = arg
    return bound


def translate(call: cst.Call, spec: CallSpec, tf: str) -> tuple[cst.Call, dict[str, cst.Arg]]:
    """The Keras call for ``call``, and the TF1 arguments the caller must handle (consumed)."""
    bound = bind(call, spec.signature)
    consumed = {name: arg for name, arg in bound.items() if name in spec.consumed}
    args: list[cst.Arg] = [_emit.keyword_arg(k, cst.parse_expression(v)) for k, v in spec.extra.items()]
    first_positional = bool(call.args) and call.args[0].keyword is None
    for name, arg in bound.items():
        if name in spec.consumed or name in spec.dropped:
            continue
        if name in spec.refused:
            raise Unsupported(f"`{name}=`: {spec.refused[name]}", arg)
        if name not in spec.signature:
            raise Unsupported(f"unknown argument `{name}=`", arg)
        keras_name = spec.rename.get(name, name)
        if arg is call.args[0] and first_positional and name == spec.signature[0] and not spec.extra:
            args.append(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        else:
            args.append(_emit.keyword_arg(keras_name, arg.value))
    given = {spec.rename.get(name, name) for name in bound}
    for keras_name, default in spec.explicit.items():
        if keras_name not in given:
            args.append(_emit.keyword_arg(keras_name, cst.parse_expression(default)))
    func = _emit.expr("{tf}.{target}", tf=tf, target=spec.keras)
    return _emit.one_line_call(cst.Call(func=func), args), consumed
