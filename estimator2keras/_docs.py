"""Rule documentation, rendered from the rules themselves (for `e2k explain` and docs/rules/)."""
from __future__ import annotations

from estimator2keras._rule import ExpressionRule, Rule

SECTION_ORDER = ("What it does", "Why", "Example", "Fix safety", "Limitations", "References")


def example(rule: type[Rule]) -> str | None:
    """The rule's first case as a before/after example (or the findings it reports)."""
    for case in rule.cases:
        lang = "python"
        if case.changes:
            if issubclass(rule, ExpressionRule):
                return f"```{lang}\n{case.before}\n```\n\nbecomes\n\n```{lang}\n{case.after}\n```"
            return f"Before:\n\n```{lang}\n{case.before.rstrip()}\n```\n\nAfter `e2k rewrite`:\n\n```{lang}\n{case.after.rstrip()}\n```"
    for case in rule.cases:
        if case.findings:
            return f"```{lang}\n{case.before.rstrip()}\n```\n\nis reported as {', '.join(case.findings)}."
    return None


def render_markdown(rule: type[Rule]) -> str:
    docs = rule.docs()
    lines = [f"# {rule.code} `{rule.name}`", "", docs.title, ""]
    lines += [f"- **Kind**: {rule.kind()} rule", f"- **Fix safety**: {rule.safety.value}", f"- **Summary**: {rule.summary}", ""]
    sections = dict(docs.sections)
    sample = example(rule)
    if sample:
        sections["Example"] = sample
    for name in SECTION_ORDER:
        if sections.get(name):
            lines += [f"## {name}", "", sections[name].strip(), ""]
    for name, body in sections.items():
        if name not in SECTION_ORDER:
            lines += [f"## {name}", "", body.strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def render_index(rules: list[type[Rule]]) -> str:
    lines = [
        "# Rules",
        "",
        "Generated from the rules by `python -m estimator2keras.docs`; do not edit by hand.",
        "",
        "| Code | Name | Kind | Safety | Summary |",
        "|---|---|---|---|---|",
    ]
    for rule in rules:
        summary = rule.summary.replace("|", "\\|")
        lines.append(f"| [{rule.code}]({rule.code}.md) | `{rule.name}` | {rule.kind()} | {rule.safety.value} | {summary} |")
    return "\n".join(lines) + "\n"


def render_text(rule: type[Rule]) -> str:
    """For the terminal: the markdown, which reads well as plain text."""
    return render_markdown(rule)
