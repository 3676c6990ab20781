"""Imports the converted code needs go where isort would put them, in the file's own layout.

Each added import joins the group of its section (standard library, third party, the
program's own modules), at its sorted place when the group is sorted; a section the file
lacks becomes a group of its own; an import the file has is not added again; and no line
of the file's own changes but a ``from m import ...`` that gets a name.
"""
from __future__ import annotations

import libcst as cst
import pytest
from libcst.codemod.visitors._imports import ImportItem

from estimator2keras._imports import add_imports

CASES = [
    pytest.param(
        "import tempfile\n\nimport numpy as np\nfrom absl import app\n\nx = 1\n",
        [("time", None, None)],
        "import tempfile\nimport time\n\nimport numpy as np\nfrom absl import app\n\nx = 1\n",
        id="stdlib-group-not-after-third-party"),
    pytest.param(
        "import os\nimport tempfile\n\nimport tensorflow as tf\n",
        [("shutil", None, None), ("time", None, None)],
        "import os\nimport shutil\nimport tempfile\nimport time\n\nimport tensorflow as tf\n",
        id="sorted-place-in-group"),
    pytest.param(
        '"""Doc."""\nimport numpy as np\nimport tensorflow as tf\n\nx = 1\n',
        [("tempfile", None, None), ("time", None, None)],
        '"""Doc."""\nimport tempfile\nimport time\n\nimport numpy as np\nimport tensorflow as tf\n\nx = 1\n',
        id="new-stdlib-group-first"),
    pytest.param(
        "from __future__ import print_function\n\nimport numpy as np\n",
        [("time", None, None)],
        "from __future__ import print_function\n\nimport time\n\nimport numpy as np\n",
        id="after-future"),
    pytest.param(
        "import os\n\nfrom trainer import model\n",
        [("tensorflow", None, "tf")],
        "import os\n\nimport tensorflow as tf\nfrom trainer import model\n",
        id="module-not-beside-the-file-is-third-party"),
    pytest.param(
        "import tempfile\nimport numpy as np\n",
        [("time", None, None)],
        "import tempfile\nimport time\nimport numpy as np\n",
        id="one-block-file-stays-one-block"),
    pytest.param(
        "import sys\nimport argparse\n\nimport numpy as np\n",
        [("os", None, None)],
        "import sys\nimport argparse\nimport os\n\nimport numpy as np\n",
        id="unsorted-group-gets-it-last"),
    pytest.param(
        "import os\nfrom os import path\nimport sys\n",
        [("shutil", None, None)],
        "import os\nfrom os import path\nimport shutil\nimport sys\n",
        id="force-sort-within-sections-habit"),
    pytest.param(
        "import tensorflow as tf\nimport time\n",
        [("tensorflow", None, "tf"), ("time", None, None)],
        "import tensorflow as tf\nimport time\n",
        id="present-not-added"),
    pytest.param(
        "import os\n\nx = 1\nimport time\n\ndef f():\n    pass\n",
        [("time", None, None)],
        "import os\n\nx = 1\nimport time\n\ndef f():\n    pass\n",
        id="present-later-in-the-prologue"),
    pytest.param(
        "import os.path\n",
        [("os", None, None)],
        "import os.path\n",
        id="package-bound-by-submodule-import"),
    pytest.param(
        "from absl import app, flags\n",
        [("absl", "logging", None)],
        "from absl import app, flags, logging\n",
        id="name-joins-sorted-from-import"),
    pytest.param(
        "from absl import (\n    app,\n    flags,\n)\n",
        [("absl", "logging", None), ("absl", "b", None)],
        "from absl import (\n    app,\n    b,\n    flags,\n    logging,\n)\n",
        id="name-joins-parenthesized-from-import"),
    pytest.param(
        "from m import *\n",
        [("m", "x", None)],
        "from m import *\n",
        id="star-import-has-it"),
    pytest.param(
        "# Licence.\nx = 1\n",
        [("tensorflow", None, "tf")],
        "# Licence.\nimport tensorflow as tf\n\nx = 1\n",
        id="no-imports-at-all"),
    pytest.param(
        "import os\n\n# Third party.\nimport numpy as np\n",
        [("absl", "app", None)],
        "import os\n\n# Third party.\nimport numpy as np\nfrom absl import app\n",
        id="from-after-straight-imports"),
    pytest.param(
        "import os\n\n# Third party.\nimport numpy as np\n",
        [("absl", None, None)],
        "import os\n\n# Third party.\nimport absl\nimport numpy as np\n",
        id="first-of-group-keeps-its-comment-on-top"),
]


@pytest.mark.parametrize("code, requests, expected", CASES)
def test_added_where_isort_would_put_it(code, requests, expected):
    items = [ImportItem(module, obj, asname) for module, obj, asname in requests]
    assert add_imports(cst.parse_module(code), items).code == expected


def test_relative_import_is_local():
    items = [ImportItem("", "sibling", None, relative=1)]
    code = "import os\n\nimport numpy as np\n"
    assert add_imports(cst.parse_module(code), items).code == code + "\nfrom . import sibling\n"


def test_program_modules_are_local(tmp_path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    task = tmp_path / "trainer" / "task.py"
    code = "import tempfile\n\nfrom trainer.model import build\n"
    task.write_text(code)
    module = add_imports(cst.parse_module(code), [ImportItem("tensorflow", None, "tf")], str(task))
    assert module.code == "import tempfile\n\nimport tensorflow as tf\n\nfrom trainer.model import build\n"


def test_file_left_as_it_was_when_nothing_is_added():
    module = cst.parse_module("import time\n")
    assert add_imports(module, [ImportItem("time")]) is module


def test_code_that_is_not_a_file_reads_no_directory(tmp_path, monkeypatch):
    (tmp_path / "absl").mkdir()  # in the working directory, beside no file being converted
    monkeypatch.chdir(tmp_path)
    module = add_imports(cst.parse_module("import numpy as np\n"), [ImportItem("absl", "app", None)], "case.py")
    assert module.code == "import numpy as np\nfrom absl import app\n"
