"""The rule pages in docs/rules are generated from the rules and must be up to date."""
from __future__ import annotations

from conftest import REPO
from estimator2keras.docs import pages

RULE_DOCS = REPO / "docs" / "rules"


def test_generated_rule_pages_are_up_to_date():
    wanted = pages()
    present = {p.name for p in RULE_DOCS.glob("*.md")}
    assert present == set(wanted), "run `make docs` (python -m estimator2keras.docs docs/rules)"
    for name, text in wanted.items():
        assert (RULE_DOCS / name).read_text() == text, f"{name} is stale: run `make docs`"


def test_every_user_facing_doc_exists():
    for name in ("index.md", "cli.md", "parity.md", "configuration.md", "pre-commit.md", "custom-rules.md", "notebooks.md", "rules/README.md",
                 "helpers.md", "emitted-code.md", "side-by-side.md"):
        assert (REPO / "docs" / name).is_file(), name


def test_custom_rules_walkthrough_shows_the_example_package_as_it_is():
    page = (REPO / "docs" / "custom-rules.md").read_text()
    example = REPO / "examples" / "team-e2k-rules"
    for part in ("team_e2k_rules/make_estimator_to_estimator.py", "demo/train.py", "demo/train_keras.py"):
        assert (example / part).read_text().rstrip() in page, f"docs/custom-rules.md is stale: {part} changed"


def test_the_helpers_page_lists_every_helper_as_it_is():
    from estimator2keras import _helpers

    page = (REPO / "docs" / "helpers.md").read_text()
    assert _helpers.docs_table() in page, "docs/helpers.md is stale: its table is _helpers.docs_table()"


def test_the_side_by_side_page_shows_each_fixtures_output_as_it_is():
    page = (REPO / "docs" / "side-by-side.md").read_text()
    for case in ("seed_mirrored_linear", "early_stopping", "checkpoint_resume"):
        for name in ("before.py", "after.py"):
            text = (REPO / "fixtures" / case / name).read_text()
            if text.startswith('"""'):
                text = text[text.index('"""', 3) + 3:].lstrip("\n")
            assert text.rstrip("\n") in page, f"docs/side-by-side.md is stale: fixtures/{case}/{name} changed"


def test_the_jax_page_quotes_the_fixtures_output_as_it_is():
    page = (REPO / "docs" / "jax-target.md").read_text()
    quoted = page.split("```python\n", 1)[1].split("```", 1)[0]
    after = (REPO / "fixtures" / "seed_mirrored_linear" / "jax" / "after.py").read_text()
    position = 0
    for part in quoted.split("...\n"):
        found = after.find(part.strip("\n"), position)
        assert found >= 0, f"docs/jax-target.md is stale: fixtures/seed_mirrored_linear/jax/after.py changed:\n{part}"
        position = found + len(part.strip("\n"))
