"""Reading a model_fn's recurrent layers: TF1 RNN cells run by ``tf.nn.dynamic_rnn`` or
``tf.nn.static_rnn`` become Keras ``GRU`` / ``LSTM`` layers.

``cell = tf.nn.rnn_cell.GRUCell(n)`` then ``outputs, state = tf.nn.dynamic_rnn(cell, x,
dtype=tf.float32)``: the cell is a layer object made in ``__init__`` (``self.gru =
tf.keras.layers.GRU(n, reset_after=False)``), and the statement that ran it is written in
``call`` as a Keras expert would, asking Keras only for what the program reads afterwards
(the sequence of outputs, the final state, an LSTM's ``h`` and ``c``). A ``MultiRNNCell`` is
a stack of layers, each but the top returning its sequence. Every read of ``outputs`` and
``state`` is mapped to what Keras returns: TF1's LSTMStateTuple is ``(c, h)``, Keras's
``return_state`` gives ``[outputs, h, c]``. What has no exact Keras counterpart is refused
with its reason. The parity harness presents TF1's cell variables in Keras's layout
(``parity/_legacy_side.py``), so both programs start from the same weights.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn_read import TENSOR_NAMES, _Def, _LayerApp, _walk

#: TF1 cells (paths without ``compat.v1.``) -> the Keras layer of the same recurrence.
CELLS = {
    "nn.rnn_cell.GRUCell": "GRU", "contrib.rnn.GRUCell": "GRU",
    "nn.rnn_cell.BasicLSTMCell": "LSTM", "contrib.rnn.BasicLSTMCell": "LSTM",
    "nn.rnn_cell.LSTMCell": "LSTM", "contrib.rnn.LSTMCell": "LSTM",
}
MULTI_CELLS = frozenset({"nn.rnn_cell.MultiRNNCell", "contrib.rnn.MultiRNNCell"})
#: Each cell's TF1 signature.
CELL_SIGNATURES = {
    "GRUCell": ("num_units", "activation", "reuse", "kernel_initializer", "bias_initializer", "name", "dtype"),
    "BasicLSTMCell": ("num_units", "forget_bias", "state_is_tuple", "activation", "reuse", "name", "dtype"),
    "LSTMCell": ("num_units", "use_peepholes", "cell_clip", "initializer", "num_proj", "proj_clip",
                 "num_unit_shards", "num_proj_shards", "forget_bias", "state_is_tuple", "activation", "reuse",
                 "name", "dtype"),
}
#: Cell arguments that change the computation or the variables, refused unless at their default.
CELL_REFUSED = {
    "use_peepholes": ("False", "peephole connections have no Keras LSTM counterpart"),
    "cell_clip": ("None", "clipping the cell state has no Keras LSTM counterpart"),
    "num_proj": ("None", "a projection of the output (num_proj) has no Keras LSTM counterpart"),
    "proj_clip": ("None", "a projection of the output (proj_clip) has no Keras LSTM counterpart"),
    "num_unit_shards": ("None", "sharded variables have no Keras counterpart"),
    "num_proj_shards": ("None", "sharded variables have no Keras counterpart"),
    "state_is_tuple": ("True", "a concatenated LSTM state (state_is_tuple=False) is not converted"),
    "reuse": ("None", "`reuse=` shares variables through scopes, which Keras layers do not"),
    "initializer": ("None", "TF1 initialises one kernel over [inputs + units] rows; Keras has separate input and "
                            "recurrent kernels, so the initializer cannot be carried over exactly"),
    "kernel_initializer": ("None", "TF1 initialises one kernel over [inputs + units] rows; Keras has separate input "
                                   "and recurrent kernels, so the initializer cannot be carried over exactly"),
    "bias_initializer": ("None", "TF1's GRUCell gives the bias initializer to its gates and its candidate alike; "
                                 "Keras's GRU bias has no such split"),
}
#: ``tf.nn.dynamic_rnn`` / ``static_rnn`` (paths without ``compat.v1.``) -> (signature, static).
RUNNERS = {
    "nn.dynamic_rnn": (("cell", "inputs", "sequence_length", "initial_state", "dtype", "parallel_iterations",
                        "swap_memory", "time_major", "scope"), False),
    "nn.static_rnn": (("cell", "inputs", "initial_state", "dtype", "sequence_length", "scope"), True),
    "contrib.rnn.static_rnn": (("cell", "inputs", "initial_state", "dtype", "sequence_length", "scope"), True),
}
#: What e2k converts of TF1's RNN API (paths without ``compat.v1.``).
RNN_CONVERTED = frozenset({*CELLS, *MULTI_CELLS, *RUNNERS})
RUNNER_REFUSED = {
    "sequence_length": ("None", "`sequence_length=` (sequences of different lengths) is not converted: Keras takes a "
                                "mask instead, and the final state of a masked sequence must be checked by hand"),
    "initial_state": ("None", "an `initial_state=` is not converted"),
    "time_major": ("False", "time-major inputs (time_major=True) are not converted"),
}
#: The initial values TF1 gave that Keras's defaults do not reproduce (parity copies TF1's).
INIT_NOTES = {
    "GRU": "TF1's GRUCell drew one Glorot kernel over inputs + units and started its gate biases at 1",
    "LSTM": "TF1's LSTM cell drew one Glorot kernel over inputs + units (Keras: recurrent kernel orthogonal)",
}


@dataclass
class _Cell:
    call: cst.Call
    kind: str  # "GRU" / "LSTM"
    constructor: cst.Call


@dataclass
class _Run:
    """One ``outputs, state = tf.nn.dynamic_rnn(cell, x, ...)`` and how ``call`` writes it."""

    d: _Def
    call: cst.Call
    static: bool
    inputs: cst.BaseExpression
    cells: list[_Cell]
    apps: list[_LayerApp] = field(default_factory=list)
    outputs_name: str | None = None
    #: (layer, "h" / "c") -> the name ``call`` binds it to.
    states: dict = field(default_factory=dict)
    sequence: bool = False  # the top layer's outputs at every step are read


def _path(ctx, call: cst.Call) -> str:
    path = ctx.call_api_path(call) or ""
    return path[len("compat.v1."):] if path.startswith("compat.v1.") else path


def _index(node: cst.SubscriptElement | None) -> int | None:
    """A literal integer subscript (``state[1]``, ``outputs[-1]``)."""
    if node is None or not isinstance(node.slice, cst.Index):
        return None
    value = node.slice.value
    if isinstance(value, cst.Integer):
        return int(value.value)
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and isinstance(value.expression, cst.Integer):
        return -int(value.expression.value)
    return None


class RnnReading:
    """Methods of ``_modelfn._Converter`` that read RNN cells and the functions running them."""

    def is_rnn_path(self, call: cst.Call) -> bool:
        path = _path(self.ctx, call)
        return path in CELLS or path in MULTI_CELLS or path in RUNNERS

    def read_rnns(self, forward: list[_Def]) -> None:
        """Find every RNN function in the forward statements and read its cells and reads."""
        found = False
        for d in forward:
            for call in _calls(d.value):
                if _path(self.ctx, call) in RUNNERS and call not in self.rnn_consumed:
                    self.read_rnn(d, call)
                    found = True
        if found:
            self.check_rnn_cell_reads()

    def read_rnn(self, d: _Def, call: cst.Call) -> None:
        from estimator2keras._units import bind_arguments

        what = f"`{_emit.code(call.func)}`"
        target = d.small.targets[0].target if isinstance(d.small, cst.Assign) and len(d.small.targets) == 1 else None
        if d.value is not call or not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2 \
                or not all(isinstance(e.value, cst.Name) for e in target.elements):
            self.refuse(call, f"{what} is converted where its result is unpacked at once: `outputs, state = "
                              f"{_emit.code(call.func)}(...)`")
        signature, static = RUNNERS[_path(self.ctx, call)]
        bound = bind_arguments(call, signature)
        for key, (default, reason) in RUNNER_REFUSED.items():
            if key in bound and _emit.code(bound[key].value) != default:
                self.refuse(bound[key], reason)
        if not _float32(self.ctx, bound.get("dtype")):
            self.refuse(bound["dtype"], f"{what} with another dtype than float32 is not converted")
        if "cell" not in bound or "inputs" not in bound:
            self.refuse(call, f"{what} without a cell and its inputs is not converted")
        self._rnn_pending = []
        run = _Run(d, call, static, bound["inputs"].value, self.rnn_cells(bound["cell"].value, d.index))
        self.rnn_consumed.add(call)
        names = [e.value.value for e in target.elements]
        self.rnn_reads_of(run, names)
        self.rnn_runs[d.small] = run
        top = len(run.cells) - 1
        named = {j if j is not None else top: cell_def.name for cell_def, j in self._rnn_pending
                 if j is not None or len(run.cells) == 1}  # a cell's own name, not its MultiRNNCell's
        for j, cell in enumerate(run.cells):
            flags = []
            if j < top or run.sequence:
                flags.append(_emit.keyword_arg("return_sequences", cst.Name("True")))
            if self.rnn_returns_state(run, j):
                flags.append(_emit.keyword_arg("return_state", cst.Name("True")))
            constructor = cell.constructor.with_changes(args=_emit.call_args([*cell.constructor.args, *flags]))
            # `cell1 = GRUCell(n)`: `self.cell1`, as the user named it
            hint = named.get(j) if named.get(j, "").isidentifier() and named.get(j) not in TENSOR_NAMES else cell.kind.lower()
            app = _LayerApp(cell.call, self._attr(hint), constructor, None, None)
            app.note = INIT_NOTES[cell.kind] if all(c.kind != cell.kind for c in run.cells[:j]) else None
            run.apps.append(app)
            self.layer_apps[(call, j)] = app
        for cell_def, j in self._rnn_pending:
            self.rnn_cell_objects[cell_def.name] = (cell_def, run.apps[-1 if j is None else j].attr)
        if self.plan is not None:
            kinds = " + ".join(f"`{c.kind}`" for c in run.cells)
            self.plan.fixed(call, "E2K302", f"{what} of TF1 cells -> Keras {kinds} made in __init__, returning what the "
                                            "program reads")

    def rnn_cells(self, node: cst.BaseExpression, before: int) -> list[_Cell]:
        """The cells an RNN function runs: one cell, or a MultiRNNCell's list, followed through
        the model_fn's names (each name then made in ``__init__``, never in ``call``)."""
        if isinstance(node, cst.Name):
            self.rnn_cell_uses.append(node)
        node, d = self._rnn_value(node, before)
        if not isinstance(node, cst.Call):
            self.refuse(node, "e2k cannot tell which RNN cell this is (a cell made in the model_fn is converted)")
        path = _path(self.ctx, node)
        if d is not None:
            self._rnn_pending.append((d, None))
        if path in CELLS:
            return [self.rnn_cell(node)]
        if path.endswith("Wrapper"):
            self.refuse(node, f"`{_emit.code(node.func)}` is not converted: Keras's dropout= masks the same units at every "
                              "time step where TF1's DropoutWrapper draws a new mask at each, and other wrappers have "
                              "no Keras layer argument")
        if path not in MULTI_CELLS:
            self.refuse(node, f"`{_emit.code(node.func)}` is not an RNN cell e2k converts (GRUCell, BasicLSTMCell, "
                              "LSTMCell, MultiRNNCell of them)")
        self.rnn_consumed.add(node)
        extra = [a for a in node.args[1:] if not (a.keyword is not None and a.keyword.value == "state_is_tuple"
                                                   and _emit.code(a.value) == "True")]
        if not node.args or node.args[0].keyword not in (None,) and node.args[0].keyword.value != "cells" or extra:
            self.refuse(node, "a MultiRNNCell is converted from its list of cells alone")
        listed = node.args[0].value
        listed, _ = self._rnn_value(listed, before)
        cells: list[_Cell] = []
        if isinstance(listed, (cst.List, cst.Tuple)):
            for element in listed.elements:
                if isinstance(element, cst.StarredElement):
                    self.refuse(element, "a MultiRNNCell's list with * is not converted")
                if isinstance(element.value, cst.Name):
                    self.rnn_cell_uses.append(element.value)
                value, inner = self._rnn_value(element.value, before)
                if inner is not None:
                    self._rnn_pending.append((inner, len(cells)))
                if not (isinstance(value, cst.Call) and _path(self.ctx, value) in CELLS):
                    self.refuse(element.value, "a MultiRNNCell of something else than GRU or LSTM cells is not converted")
                cells.append(self.rnn_cell(value))
        elif isinstance(listed, cst.ListComp) and isinstance(listed.elt, cst.Call) and _path(self.ctx, listed.elt) in CELLS \
                and listed.for_in.inner_for_in is None and not listed.for_in.ifs:
            count = _range_count(listed.for_in.iter)
            targets = {n.value for n in _walk(listed.for_in.target) if isinstance(n, cst.Name)}
            if count is None or any(isinstance(n, cst.Name) and n.value in targets for n in _walk(listed.elt)):
                self.refuse(listed, "a MultiRNNCell's list is converted when it is written out, or made by "
                                    "`[Cell(...) for _ in range(N)]` with a literal N")
            cells = [self.rnn_cell(listed.elt) for _ in range(count)]
        else:
            self.refuse(listed, "e2k cannot read this MultiRNNCell's list of cells")
        if not cells:
            self.refuse(node, "an empty MultiRNNCell")
        return cells

    def _rnn_value(self, node: cst.BaseExpression, before: int):
        """A name followed to the single assignment of the model_fn that made it."""
        if not isinstance(node, cst.Name):
            return node, None
        defs = [d for d in self.defs if d.name == node.value]
        d = self.latest_def(node.value, before)
        if d is None or len(defs) != 1 or not isinstance(d.small, cst.Assign) or len(d.small.targets) != 1 \
                or not isinstance(d.small.targets[0].target, cst.Name):
            self.refuse(node, f"`{node.value}` is converted when one assignment of the model_fn makes it")
        return d.value, d

    def rnn_cell(self, call: cst.Call) -> _Cell:
        from estimator2keras._units import bind_arguments

        path = _path(self.ctx, call)
        kind, name = CELLS[path], path.rsplit(".", 1)[-1]
        bound = bind_arguments(call, CELL_SIGNATURES[name])
        self.rnn_consumed.add(call)
        what = f"`{_emit.code(call.func)}`"
        for key, arg in bound.items():
            if key not in CELL_SIGNATURES[name]:
                self.refuse(arg, f"{what}'s `{key}=` is not converted")
        for key, (default, reason) in CELL_REFUSED.items():
            if key in bound and _emit.code(bound[key].value) != default:
                self.refuse(bound[key], reason)
        if "num_units" not in bound:
            self.refuse(call, f"{what} without its number of units")
        if not _float32(self.ctx, bound.get("dtype")):
            self.refuse(bound["dtype"], f"{what} with another dtype than float32 is not converted")
        args = [cst.Arg(bound["num_units"].value)]
        activation = bound.get("activation")
        if activation is not None and _emit.code(activation.value) != "None":
            # TF1 applies it where Keras does: the candidate (GRU), the cell input and output (LSTM).
            args.append(_emit.keyword_arg("activation", activation.value))
        if kind == "GRU":
            # TF1's GRUCell applies the reset gate before the recurrent matrix: reset_after=False.
            args.append(_emit.keyword_arg("reset_after", cst.Name("False")))
        forget = bound.get("forget_bias")
        if forget is not None:
            value = _number(forget.value)
            if value == 0.0:
                args.append(_emit.keyword_arg("unit_forget_bias", cst.Name("False")))
            elif value != 1.0:
                # Keras adds no constant to the forget gate: it can only start its bias at 1 (the default).
                self.refuse(forget, "a forget_bias other than 1.0 or 0.0 has no Keras LSTM counterpart "
                                    "(unit_forget_bias starts the forget gate's bias at 1)")
        if "name" in bound and _emit.code(bound["name"].value) != "None":
            args.append(_emit.keyword_arg("name", bound["name"].value))
        constructor = _emit.expr("{tf}.keras.layers.{kind}()", tf=self.tf, kind=kind)
        return _Cell(call, kind, constructor.with_changes(args=_emit.call_args(args)))

    def rnn_returns_state(self, run: _Run, j: int) -> bool:
        """Layer ``j`` is asked for its state: something reads it, and it is not the layer's
        only output (the top layer's last output is its ``h``)."""
        wanted = {piece for (layer, piece) in run.states if layer == j}
        if not wanted:
            return False
        if j < len(run.cells) - 1 or run.sequence:
            return True
        return "c" in wanted

    def rnn_reads_of(self, run: _Run, names: list[str]) -> None:
        """What the program reads of ``outputs`` and ``state``, each read mapped to a name of
        ``call``; any other use is refused."""
        outputs, state = names
        top = len(run.cells) - 1
        reads = {name: [] for name in names if name != "_"}
        bound = {id(n) for n in _walk(run.d.small.targets[0].target)}
        for node in _walk(self.fn.body):
            if isinstance(node, cst.Name) and node.value in reads and self._is_read(node) and id(node) not in bound:
                reads[node.value].append(node)
        for name, found in reads.items():
            # `outputs = outputs[-1]`: only the reads the RNN's assignment reaches are its results
            if any(d.name == name and isinstance(d.small, (cst.If, cst.For)) for d in self.defs):
                self.refuse(found[0] if found else run.call, f"`{name}` is assigned in an `if` or a loop too; e2k "
                                                             "converts an RNN's results assigned once")
            reads[name] = [node for node in found if self._reaching(node, name) is run.d.small]
        for node in reads.get(outputs, []):
            parent = self.ctx.parent(node)
            if run.static:
                index = _index(parent.slice[0]) if isinstance(parent, cst.Subscript) and parent.value is node \
                    and len(parent.slice) == 1 else None
                if index != -1:
                    self.refuse(node, f"static_rnn's list of outputs is converted where only its last one is read "
                                      f"(`{outputs}[-1]`)")
                run.states.setdefault((top, "h"), state if reads.get(state) else outputs)
                self.rnn_reads[parent] = (run, (top, "h"))
            else:
                run.sequence = True
                run.outputs_name = outputs
        for node in reads.get(state, []):
            parent = self.ctx.parent(node)
            layer, piece, read = self._state_read(run, node, parent, state)
            run.states.setdefault((layer, piece), _state_name(state, layer, piece, run))
            self.rnn_reads[read] = (run, (layer, piece))
        for (layer, piece) in list(run.states):
            if (layer, piece) == (top, "h") and state in reads and reads[state]:
                run.states[(layer, piece)] = _state_name(state, layer, piece, run)
        taken = {d.name for d in self.defs}
        for name in run.states.values():
            if name not in (outputs, state) and name in taken:
                self.refuse(run.call, f"`{name}`, the name e2k gives a part of `{state}`, is already used in the model_fn")

    def _reaching(self, node: cst.CSTNode, name: str):
        """The statement whose assignment of ``name`` a read of it sees."""
        small = node
        while small is not None and small not in self.order:
            small = self.ctx.parent(small)
        if small is None:
            return None
        d = self.latest_def(name, self.order[small])
        return d.small if d is not None else None

    def _state_read(self, run: _Run, node: cst.Name, parent, state: str):
        """(layer, "h" / "c", the node read) of one read of an RNN's final state."""
        multi = len(run.cells) > 1
        refuse = (f"`{state}` is read as a whole; e2k converts reads of one layer's state (`{state}[i]`) and of an "
                  "LSTM state's `.h` / `.c`")
        layer, node_read, here = 0, node, parent
        if multi:
            index = _index(here.slice[0]) if isinstance(here, cst.Subscript) and here.value is node and len(here.slice) == 1 else None
            if index is None or not -len(run.cells) <= index < len(run.cells):
                self.refuse(node, refuse)
            layer = index % len(run.cells)
            node_read, here = here, self.ctx.parent(here)
        if run.cells[layer].kind == "GRU":
            return layer, "h", node_read
        if isinstance(here, cst.Attribute) and here.value is node_read and here.attr.value in ("h", "c"):
            return layer, here.attr.value, here
        if isinstance(here, cst.Subscript) and here.value is node_read and len(here.slice) == 1 \
                and _index(here.slice[0]) in (0, 1, -1, -2):
            return layer, "ch"[_index(here.slice[0]) % 2], here  # LSTMStateTuple is (c, h)
        self.refuse(node, refuse)

    def check_rnn_cell_reads(self) -> None:
        """A cell object is read by the RNN function (or a MultiRNNCell's list) only, or for its
        ``output_size`` (its layer's units): anything else uses TF1's cell API."""
        for name, (d, attr) in self.rnn_cell_objects.items():
            for node in _walk(self.fn.body):
                if not (isinstance(node, cst.Name) and node.value == name and self._is_read(node)):
                    continue
                if any(node is use for use in self.rnn_cell_uses):
                    continue
                parent = self.ctx.parent(node)
                if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "output_size":
                    self.rnn_reads[parent] = ("units", attr)
                    continue
                self.refuse(node, f"the RNN cell `{name}` is used otherwise than run by dynamic_rnn / static_rnn "
                                  "(or read for its output_size), which e2k does not convert")
            self.layer_objects[name] = d  # made in __init__: never written in `call`

    # -- writing `call` ------------------------------------------------------------------------
    def rnn_lines(self, run: _Run, rewrite) -> list[cst.BaseSmallStatement]:
        """The statements of ``call`` that run the layers: nested calls through the stack, a
        statement of its own for a layer whose state is read besides its sequence."""
        value = rewrite(run.inputs)
        if run.static:
            unstacked = self._unstacked(run.inputs)
            # [batch, time, features]: the tensor `tf.unstack(t, axis=1)` took apart, or the steps stacked
            value = rewrite(unstacked) if unstacked is not None else _emit.expr("{tf}.stack({x}, axis=1)", tf=self.tf,
                                                                                   x=value)
        lines = []
        top = len(run.cells) - 1
        out_name = run.outputs_name or "outputs"
        for j, app in enumerate(run.apps):
            applied = _emit.expr(f"self.{app.attr}({{x}})", x=value)
            if j < top:
                if not self.rnn_returns_state(run, j):
                    value = applied
                    continue
                sequence = f"{out_name}_{j}"
                lines.append(self._rnn_assign([sequence, *self._state_targets(run, j)], applied))
                value = cst.Name(sequence)
                continue
            if self.rnn_returns_state(run, j):
                first = run.outputs_name if run.sequence else "_"
                lines.append(self._rnn_assign([first, *self._state_targets(run, j)], applied))
            elif run.sequence:
                lines.append(self._rnn_assign([run.outputs_name], applied))
            else:
                lines.append(self._rnn_assign([run.states[(j, "h")]], applied))
        return lines

    def _unstacked(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """``t`` of ``tf.unstack(t, axis=1)`` written in the RNN function's call."""
        from estimator2keras._units import bind_arguments

        if not (isinstance(node, cst.Call) and _path(self.ctx, node) == "unstack"):
            return None
        bound = bind_arguments(node, ("value", "num", "axis", "name"))
        axis = bound.get("axis")
        if "value" in bound and axis is not None and isinstance(axis.value, cst.Integer) and axis.value.value == "1":
            return bound["value"].value
        return None

    def _state_targets(self, run: _Run, j: int) -> list[str]:
        names = [run.states.get((j, "h"), "_")]
        if run.cells[j].kind == "LSTM":
            names.append(run.states.get((j, "c"), "_"))
        return names

    @staticmethod
    def _rnn_assign(names: list[str], value: cst.BaseExpression) -> cst.Assign:
        target = cst.Name(names[0]) if len(names) == 1 else cst.Tuple(
            [cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])
        return cst.Assign(targets=[cst.AssignTarget(target)], value=value)

    def rnn_read_replacement(self, original: cst.CSTNode) -> cst.BaseExpression | None:
        """What ``call`` reads where the model_fn read a part of an RNN's results."""
        found = self.rnn_reads.get(original)
        if found is None:
            return None
        if found[0] == "units":
            return _emit.expr(f"self.{found[1]}.units")
        run, key = found
        return cst.Name(run.states[key])


def _state_name(state: str, layer: int, piece: str, run: _Run) -> str:
    multi = len(run.cells) > 1
    name = f"{state}_{layer}" if multi else state
    return f"{name}_{piece}" if run.cells[layer].kind == "LSTM" else name


def _calls(node: cst.CSTNode):
    for n in _walk(node):
        if isinstance(n, cst.Call):
            yield n


def _float32(ctx, arg: cst.Arg | None) -> bool:
    """No dtype (the inputs'), or float32: what Keras's layers compute in."""
    if arg is None or _emit.code(arg.value) in ("None", "'float32'", '"float32"'):
        return True
    return ctx.api_path(arg.value) == "float32"


def _number(node: cst.BaseExpression) -> float | None:
    if isinstance(node, (cst.Float, cst.Integer)):
        return float(node.value)
    return None


def _range_count(node: cst.BaseExpression) -> int | None:
    """``range(3)`` -> 3."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range" \
            and len(node.args) == 1 and isinstance(node.args[0].value, cst.Integer):
        return int(node.args[0].value.value)
    return None
