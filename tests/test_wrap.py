"""The statements e2k writes fit the file's line length (_wrap): the project's setting, else
the file's longest line, at least 79; the lines it did not write stay as they were."""
from __future__ import annotations

import textwrap

from estimator2keras import _wrap

LONG_CALL = "model.fit(train_input_fn(FLAGS.train_file, FLAGS.batch_size * strategy.num_replicas_in_sync), " \
            "steps_per_epoch=FLAGS.train_steps, callbacks=callbacks)\n"


def test_the_limit_is_the_projects_setting_else_the_files_longest_line(tmp_path):
    program = tmp_path / "pkg" / "train.py"
    program.parent.mkdir()
    program.write_text("x = 1\n")
    assert _wrap.line_limit(str(program), "x = 1\n") == 79  # at least PEP 8's
    assert _wrap.line_limit(str(program), "y = 1  # " + "z" * 100 + "\n") == 109  # the file's own habit
    (tmp_path / "setup.cfg").write_text("[flake8]\nmax-line-length = 100\n")
    _wrap._configured.cache_clear()
    assert _wrap.line_limit(str(program), "x = 1\n") == 100
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 88\n")
    _wrap._configured.cache_clear()
    assert _wrap.line_limit(str(program), "y = 1  # " + "z" * 100 + "\n") == 88  # the project's wins
    _wrap._configured.cache_clear()


def test_only_the_statements_e2k_wrote_are_wrapped():
    original = "import tensorflow as tf\n\nlong_user_line = [" + ", ".join(str(i) for i in range(40)) + "]\n"
    new = original + "\n" + LONG_CALL
    wrapped = _wrap.wrap(new, original, 79)
    assert wrapped.startswith(original)  # the program's own long line, byte for byte
    tail = wrapped[len(original):]
    assert all(len(line) <= 79 for line in tail.splitlines())
    assert compile(wrapped, "w.py", "exec") and "steps_per_epoch=FLAGS.train_steps," in tail


def test_indent_notes_docstrings_and_trailing_comments():
    new = textwrap.dedent('''\
        def build():
          """A docstring e2k wrote, long enough that it does not fit on one line at seventy-nine columns."""
          # A note e2k wrote, long enough that it does not fit on one line at seventy-nine columns either.
          if isinstance(inputs, dict):  # raw features, as a served model gets them from the export
            return 1
        ''')
    wrapped = _wrap.wrap(new, "", 79)
    assert all(len(line) <= 79 for line in wrapped.splitlines()), wrapped
    assert "  # raw features, as a served model gets them from the export\n  if isinstance(inputs, dict):\n" in wrapped
    assert wrapped.count('"""') == 2 and compile(wrapped, "w.py", "exec")
    assert "  # A note e2k wrote" in wrapped  # the file's 2-space indent kept


def test_a_statement_black_cannot_shorten_is_left_as_written():
    new = 'x = "' + "a" * 120 + '"\n'
    assert _wrap.wrap(new, "", 79) == new


HUGGING = textwrap.dedent('''\
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(
        ([[1.0]], [0])).batch(1)
    ''')
OWN_LINE = textwrap.dedent('''\
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(
        ([[1.0]], [0])
    ).batch(1)
    ''')


def test_brackets_close_where_the_files_own_do():
    assert _wrap.closers_hug(HUGGING) and not _wrap.closers_hug(OWN_LINE)
    assert not _wrap.closers_hug("x = 1\n")  # no habit: black's
    for original, hugs in ((HUGGING, True), (OWN_LINE, False), ("import tensorflow as tf\n", False)):
        wrapped = _wrap.wrap(original + "\n" + LONG_CALL, original, 79)
        tail = wrapped[len(original):]
        assert all(len(line) <= 79 for line in tail.splitlines())
        lone_closers = [line for line in tail.splitlines() if line.strip() in (")", "),")]
        assert bool(lone_closers) is not hugs, tail
        assert compile(wrapped, "w.py", "exec")


def test_hugging_keeps_a_one_element_tuples_comma():
    lines = ["x = (", "    some_long_function_name(argument_one, argument_two),", ")"]
    # Dropping the comma would make it no tuple: it stays before the bracket.
    assert _wrap._hugged(lines, 79) == ["x = (", "    some_long_function_name(argument_one, argument_two),)"]
    assert _wrap._hugged(["f(", "    a,", "    b,", ")"], 79) == ["f(", "    a,", "    b)"]


def test_continuation_lines_follow_the_bracket_e2k_moved():
    # `params={"lr": 0.1,` became `model = build_model({"lr": 0.1,`; `return {...` moved left:
    # the next lines, aligned with the old bracket, stayed where they were (a new user's program).
    original = textwrap.dedent('''\
        def main():
          estimator = tf.estimator.Estimator(
              model_fn=model_fn,
              params={"lr": 0.1, "unused_a": 1,
                      "unused_b": [1,
                                   2]})
          predictions = {"class_ids": tf.argmax(logits, axis=1),
                         "probabilities": tf.nn.softmax(logits)}
        ''')
    new = textwrap.dedent('''\
        def main():
          model = build_model({"lr": 0.1, "unused_a": 1,
                      "unused_b": [1,
                                   2]})
          return {"class_ids": tf.argmax(logits, axis=1),
                         "probabilities": tf.nn.softmax(logits)}
        ''')
    assert _wrap.wrap(new, original, 79) == textwrap.dedent('''\
        def main():
          model = build_model({"lr": 0.1, "unused_a": 1,
                               "unused_b": [1,
                                            2]})
          return {"class_ids": tf.argmax(logits, axis=1),
                  "probabilities": tf.nn.softmax(logits)}
        ''')
    # Lines e2k did not write, and hanging indents (nothing after the bracket), stay as they are.
    untouched = "x = f(a,\n        b)\ny = g(\n    c)\n"
    assert _wrap.wrap(untouched, untouched, 79) == untouched
    assert _wrap.wrap("y = gg(\n    c)\n", "", 79) == "y = gg(\n    c)\n"


def test_a_sentence_e2k_wrote_over_several_comment_lines_is_filled_again_as_one():
    new = ("def f():\n"
           "  # Built here, in the Estimator's order (the DNN, then the linear model), so that the linear\n"
           "  # model's own optimizer can be built before training.\n"
           "  # Another sentence.\n"
           "  x = 1\n")
    assert _wrap.wrap(new, "", 79) == (
        "def f():\n"
        "  # Built here, in the Estimator's order (the DNN, then the linear model), so\n"
        "  # that the linear model's own optimizer can be built before training.\n"
        "  # Another sentence.\n"
        "  x = 1\n")
    # A list keeps its lines.
    listed = "# Changed:\n# - E2K402 The Estimator restored and saved checkpoints in its model_dir; so does it now\n#   as well.\n"
    assert "\n#   as well.\n" in _wrap.wrap(listed, "", 79)


def test_a_decorator_e2k_wrote_is_aligned_and_no_more_than_two_blank_lines_it_left_follow():
    new = textwrap.dedent('''\
        model.fit(x)


        @tf.function(input_signature=[serving_signature({name: tf.zeros([1, 2])
                 for name in ["x"]})])
        def serve(features):
          return model.predict_step(features)




        tf.saved_model.save(model, "export")
        ''')
    assert _wrap.wrap(new, "model.fit(x)\n", 79) == textwrap.dedent('''\
        model.fit(x)


        @tf.function(input_signature=[serving_signature({name: tf.zeros([1, 2])
                                                         for name in ["x"]})])
        def serve(features):
          return model.predict_step(features)


        tf.saved_model.save(model, "export")
        ''')
    # The user's own blank lines stay as many as they were.
    own = "x = 1\n\n\n\ny = 2\n"
    assert _wrap.wrap(own, own, 79) == own
