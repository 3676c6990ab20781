"""Functions of the program that make layers and that the forward pass uses as building
blocks: each becomes a Keras layer class.

TF1 programs build their networks from functions that make layers (``conv_block(net, 16,
training)``), call them several times with different settings, call them from other such
functions, and loop inside them. A TF1 function call made new variables at each call; a
Keras layer object makes its weights once. So such a function becomes a
``keras.layers.Layer`` subclass: its settings (the parameters that configure its layers)
are the constructor's, its first parameter the tensor ``call`` takes, its training
parameter Keras's ``training`` flag. Each call of the function in the forward pass is then
one layer of the model (made in ``__init__``, applied in ``call``), exactly like a Keras
layer, so everything the model's conversion does with layers (loops, `if`s, helpers that
call them) it does with these.

The body of the function is converted by the same reading as a model_fn's forward pass
(``_BlockConverter``), recursively: a block that calls blocks holds them as its layers.
The functions the fast paths handle stay as they were converted before: a helper called
once becomes a method of the model, a helper that is one expression is written out at each
call (``_modelfn_read.read_helpers``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit

#: Roles of the calls that make model state: layers (TF1's, Keras's) and weights (``get_variable``).
MAKERS = ("layer", "layer_function", "keras_layer", "variable")

#: Keyword arguments a layer takes its training flag by.
TRAINING_KEYWORDS = frozenset({"training", "is_training"})


@dataclass
class Block:
    """A function of the program that became a Keras layer class."""

    fn: cst.FunctionDef
    class_name: str
    #: The parameter whose argument is the tensor the layer is applied to.
    input: str
    #: The parameter that held the training flag, if any.
    training: str | None
    #: The constructor's parameters: the function's others, in order.
    config: list[str] = field(default_factory=list)
    statement: cst.ClassDef | None = None
    #: The parameter its callers give the model_fn's `mode` (``rnn_model(features, mode,
    #: params)``): its tests of the mode are Keras's `training` flag.
    mode: str | None = None


@dataclass
class Dispatch:
    """``model_functions = {"rnn": rnn_model, "dnn": dnn_model}``, then ``model_function =
    model_functions[params["model"]]`` and ``model_function(features, mode, params)``: one
    of several functions making layers, chosen by a setting."""

    table: cst.Dict
    key: cst.BaseExpression
    functions: list[cst.FunctionDef]
    #: The model_fn's statements that pick the function: made in __init__ now.
    smalls: list[cst.BaseSmallStatement]


def class_name_for(function_name: str) -> str:
    """``conv_block`` -> ``ConvBlock``; ``_dense_block`` -> ``DenseBlock``."""
    core = function_name.lstrip("_") or "block"
    name = "".join(part[:1].upper() + part[1:] for part in core.split("_") if part)
    return name if name.isidentifier() else "Block"


def own_calls(node: cst.CSTNode):
    """Calls in ``node``, not in functions, classes or lambdas defined inside it."""
    from estimator2keras._modelfn_read import _walk_own

    return (n for n in _walk_own(node) if isinstance(n, cst.Call))


class BlockReading:
    """The model reader's side: which calls of the forward pass apply a block, and the layer
    each becomes. Mixed into ``_modelfn_read._ModelReader``."""

    # -- which functions make layers ---------------------------------------------------------
    def makes_layers_deep(self, fn: cst.FunctionDef, depth: int = 0) -> bool:
        """``fn`` makes layers, itself or through functions of the program it calls."""
        if depth > 6:
            return False
        for inner in own_calls(fn.body):
            if self.role(inner) in MAKERS:
                return True
            target = self._definition(inner.func)
            if isinstance(target, cst.FunctionDef) and target is not fn and self.makes_layers_deep(target, depth + 1):
                return True
        return False

    def block_candidate(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function ``call`` calls when it is a module-level function making layers."""
        fn = self._definition(call.func)
        if not isinstance(fn, cst.FunctionDef) or self.ctx.parent(fn) is not self.ctx.module_of(fn):
            return None
        if fn.decorators or self.makes_keras_model(call) or not self.makes_layers_deep(fn):
            return None
        returned = _last_return(fn)
        if isinstance(returned, cst.Name):  # `w = tf.get_variable(name, shape)` then `return w`
            returned = next((small.value for stmt in fn.body.body if isinstance(stmt, cst.SimpleStatementLine)
                             for small in stmt.body if isinstance(small, cst.Assign) and len(small.targets) == 1
                             and isinstance(small.targets[0].target, cst.Name)
                             and small.targets[0].target.value == returned.value), None)
        if isinstance(returned, cst.Call) and self.role(returned) == "variable":
            return None  # `return tf.get_variable(name, shape)`: a weight, no layer (no input)
        return fn

    def method_fits(self, fn: cst.FunctionDef) -> bool:
        """Can ``fn`` be a method of the model (called once): its body of assignments, `if`s
        of assignments and scopes, and layers of its own only (no other function making
        layers)? Otherwise it is a block."""
        for inner in own_calls(fn.body):
            target = self._definition(inner.func)
            if isinstance(target, cst.FunctionDef) and target is not fn and self.makes_layers_deep(target):
                return False
        stack = list(fn.body.body)
        while stack:
            stmt = stack.pop()
            if isinstance(stmt, (cst.For, cst.While, cst.Try, cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(stmt, cst.With):
                stack.extend(stmt.body.body)
        return True

    def mark_blocks(self, calls: list[cst.Call]) -> None:
        """Among the forward pass's calls, those whose function becomes a block: called more
        than once with new layers each time (and more than one expression: one expression is
        written out at each call), or with a body that a method of the model cannot hold."""
        counts: dict[cst.FunctionDef, int] = {}
        for call in calls:
            fn = self.block_candidate(call)
            if fn is not None:
                counts[fn] = counts.get(fn, 0) + 1
        for fn, count in counts.items():
            if fn in self.block_fns:
                continue
            reused = any(
                arg.keyword is not None and arg.keyword.value == "reuse"
                for call in own_calls(fn.body) for arg in call.args
            )
            one_expression = _one_return(fn) is not None
            if not self.method_fits(fn) or (count > 1 and not reused and not one_expression):
                self.block_fns.add(fn)

    def is_block_call(self, call: cst.Call) -> bool:
        fn = self._definition(call.func)
        return fn is not None and fn in self.block_fns

    # -- the layer a block's call is ----------------------------------------------------------
    def block_of(self, fn: cst.FunctionDef) -> Block:
        root = self.root
        block = root.blocks.get(fn)
        if block is not None:
            if block.statement is None:
                self.refuse(fn, f"`{fn.name.value}` makes layers through itself (recursion), which e2k does not convert")
            return block
        name = fn.name.value
        params = fn.params
        if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.kwonly_params or params.star_kwarg \
                or params.posonly_params:
            self.refuse(fn, f"`{name}` has *args, **kwargs or keyword-only parameters, which e2k does not convert")
        names = [p.name.value for p in params.params]
        if not names:
            self.refuse(fn, f"`{name}` makes layers but takes no input")
        training = self.training_parameters(fn)
        if not training:
            # `def network(x, params, training)` whose layers do not read it (yet): still the
            # training flag its callers pass, not a setting made from the mode.
            training = {n for n in names if n in TRAINING_KEYWORDS}
        if len(training) > 1:
            self.refuse(fn, f"`{name}` takes two training flags ({', '.join(sorted(training))})")
        mode = "mode" if "mode" in names and "mode" not in training else None
        inputs = [n for n in names if n not in training and n != mode]
        if not inputs:
            self.refuse(fn, f"`{name}` makes layers but takes no input")
        class_name = _emit.unique_name(class_name_for(name), root.taken_names)
        root.taken_names.add(class_name)
        block = Block(fn, class_name, inputs[0], next(iter(training), None), inputs[1:], mode=mode)
        root.blocks[fn] = block
        from estimator2keras._modelfn import _BlockConverter

        converter = _BlockConverter(block, self.ctx, self.tf, self.plan, root)
        block.statement = converter.convert_block()
        root.definitions.append(block.statement)
        return block

    def training_parameters(self, fn: cst.FunctionDef, depth: int = 0) -> set[str]:
        """Parameters of ``fn`` that hold the training flag: given as `training=` to a layer, or
        passed where a function it calls takes its training flag."""
        params = [p.name.value for p in fn.params.params]
        found: set[str] = set()
        for call in own_calls(fn.body):
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value in TRAINING_KEYWORDS \
                        and isinstance(arg.value, cst.Name) and arg.value.value in params:
                    found.add(arg.value.value)
            target = self._definition(call.func)
            if isinstance(target, cst.FunctionDef) and target is not fn and depth < 6 and self.makes_layers_deep(target):
                inner = self.training_parameters(target, depth + 1)
                if not inner:
                    continue
                from estimator2keras._units import bind_arguments

                try:
                    bound = bind_arguments(call, tuple(p.name.value for p in target.params.params))
                except Exception:
                    continue
                for param in inner:
                    arg = bound.get(param)
                    if arg is not None and isinstance(arg.value, cst.Name) and arg.value.value in params:
                        found.add(arg.value.value)
        return found

    def dispatch_of(self, call: cst.Call) -> Dispatch | None:
        """``model_function(features, mode, params)`` where ``model_function`` is picked from
        a dict of functions of the program that make layers, by a setting the model has."""
        if not isinstance(call.func, cst.Name) or not hasattr(self, "order"):
            return None
        cache = self.root.dispatches
        if id(call) in cache:
            return cache[id(call)]
        small = call
        while small is not None and small not in self.order:
            small = self.ctx.parent(small)
        picked = self.latest_def(call.func.value, self.order[small]) if small is not None else None
        if picked is None or not isinstance(picked.small, cst.Assign) or not isinstance(picked.value, cst.Subscript):
            return None
        subscript = picked.value
        if not isinstance(subscript.value, cst.Name) or len(subscript.slice) != 1 \
                or not isinstance(subscript.slice[0].slice, cst.Index):
            return None
        smalls = [picked.small]
        held = self.latest_def(subscript.value.value, picked.index)
        if held is not None and isinstance(held.small, cst.Assign) and isinstance(held.value, cst.Dict):
            table = held.value
            smalls.append(held.small)
        else:
            from estimator2keras._units import Binding, resolve

            bound = resolve(self.ctx, subscript.value) if held is None else None
            if not (isinstance(bound, Binding) and isinstance(bound.value, cst.Dict)):
                return None
            table = bound.value
        functions = []
        for element in table.elements:
            fn = self._definition(element.value) if isinstance(element, cst.DictElement) else None
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString) \
                    or not isinstance(fn, cst.FunctionDef) or self.ctx.parent(fn) is not self.ctx.module_of(fn):
                return None
            functions.append(fn)
        if not functions or not all(self.makes_layers_deep(fn) for fn in functions):
            return None
        key = subscript.slice[0].slice.value
        what = f"`{call.func.value}(...)`, picked from `{subscript.value.value}`,"
        for name in self.names_read(key):
            if name.value not in self.arguments and not self._is_module_name(name):
                self.refuse(key, f"{what} is picked by `{name.value}`, computed in the model_fn; e2k picks it in __init__")
        signature = [p.name.value for p in functions[0].params.params]
        for fn in functions[1:]:
            if [p.name.value for p in fn.params.params] != signature:
                self.refuse(fn, f"{what} is one of functions with different parameters ({fn.name.value})")
        dispatch = cache[id(call)] = Dispatch(table, key, functions, smalls)
        for fn in functions:
            self.block_fns.add(fn)
        return dispatch

    def dispatch_app(self, call: cst.Call, dispatch: Dispatch):
        """The layer class of each function, chosen by the same setting in __init__:
        ``{"rnn": RnnModel, "dnn": DnnModel}[params["model"]](params)``."""
        blocks = [self.block_of(fn) for fn in dispatch.functions]
        if len({(b.input, b.training, b.mode, tuple(b.config)) for b in blocks}) != 1:
            self.refuse(call, f"the functions `{call.func.value}` may be ({', '.join(fn.name.value for fn in dispatch.functions)}) "
                              "take their input, settings or training flag by different parameters")
        table = dispatch.table.with_changes(elements=[
            element.with_changes(value=cst.Name(block.class_name)) for element, block in zip(dispatch.table.elements, blocks)])
        picked = cst.Subscript(value=table, slice=[cst.SubscriptElement(cst.Index(dispatch.key))])
        self.root.dispatch_smalls.update(dispatch.smalls)
        if len(dispatch.smalls) == 2:  # the dict was the model_fn's: its functions' reads go with it
            self.root.block_calls.update(id(element.value) for element in dispatch.table.elements)
        return self.block_app(call, dispatch.functions[0], picked)

    def block_app(self, call: cst.Call, fn: cst.FunctionDef | None = None, made: cst.BaseExpression | None = None):
        """``net = conv_block(net, 16, training)`` -> the layer ``ConvBlock(16)`` applied to
        ``net`` with the training flag."""
        from estimator2keras._modelfn_read import LayerCall
        from estimator2keras._units import bind_arguments

        fn = fn or self._definition(call.func)
        block = self.block_of(fn)
        signature = tuple(p.name.value for p in fn.params.params)
        try:
            bound = bind_arguments(call, signature)
        except Exception:
            self.refuse(call, f"the arguments of `{fn.name.value}(...)` cannot be matched to its parameters")
        if block.input not in bound:
            self.refuse(call, f"`{fn.name.value}(...)` is called without `{block.input}`, the tensor it makes layers for")
        for p in fn.params.params:
            if p.name.value not in bound and p.default is None:
                self.refuse(call, f"`{fn.name.value}(...)` is called without `{p.name.value}`")
        taken = {id(bound[block.input])}
        if block.mode is not None:
            given = bound.get(block.mode)
            if given is None or not (isinstance(given.value, cst.Name) and given.value.value == "mode"
                                     and (self.root is self or self.block.mode == "mode")):
                self.refuse(call, f"`{fn.name.value}(...)` is given another `mode` than the model_fn's")
            taken.add(id(given))
        kwargs = []
        if block.training is not None:
            if block.training in bound:
                taken.add(id(bound[block.training]))
                value = bound[block.training].value
            else:
                value = next(p.default for p in fn.params.params if p.name.value == block.training)
            kwargs.append(cst.Arg(value, keyword=cst.Name("training")))
        args = [arg for arg in call.args if id(arg) not in taken]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        constructor = cst.Call(func=made if made is not None else cst.Name(block.class_name), args=args)
        self.root.block_calls.add(id(call.func))
        if self.plan is not None:
            self.plan.fixed(call, "E2K302", f"`{_emit.code(call.func)}(...)` -> a `{block.class_name}` layer"
                            if made is None else f"`{_emit.code(call.func)}(...)` -> the layer class its setting picks")
        hint = call.func.value if made is not None and isinstance(call.func, cst.Name) else None
        app = self._app(call, LayerCall(constructor, bound[block.input].value, kwargs),
                        self._name_hint(call, constructor) if hint is None else hint, attr_given=False)
        if block.mode is not None and app.training is None:
            app.training = "training"  # the model_fn's mode: Keras's flag
        return app


def _last_return(fn: cst.FunctionDef) -> cst.BaseExpression | None:
    """The value of a function's last statement when it is a `return`."""
    last = fn.body.body[-1] if fn.body.body else None
    if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and isinstance(last.body[0], cst.Return):
        return last.body[0].value
    return None


def _one_return(fn: cst.FunctionDef) -> cst.BaseExpression | None:
    """The expression of a function that is one `return` statement (after a docstring)."""
    from estimator2keras._modelfn_read import _docstring_stmt

    body = [s for s in fn.body.body if not _docstring_stmt(s)]
    if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 \
            and isinstance(body[0].body[0], cst.Return):
        return body[0].body[0].value
    return None


__all__ = ["Block", "BlockReading", "class_name_for"]
