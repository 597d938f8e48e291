"""Markdown files that embed HTML (tables and lists exported from docs tools) read as Markdown."""

from __future__ import annotations

from lorehouse.parsing.markdown_and_text import parse_markdown
from lorehouse.parsing.registry import ParseOptions

ROLES = """# Roles

<table>
  <tr>
   <td><strong>Role</strong>
   </td>
   <td><strong>Responsibilities</strong>
   </td>
  </tr>
  <tr>
   <td>Head of Security
   </td>
   <td>
<ul>

<li>Defines and runs the security program

<li>Owns the <span style="x">risk register</span>
</li>
</ul>
   </td>
  </tr>
</table>

After the table.
"""


def _markdown(text: str) -> str:
    markdown, _ = parse_markdown(text.encode(), "policy.md", ParseOptions()).builder.build()
    return markdown


def test_an_html_table_becomes_a_markdown_table_with_its_cell_lists_kept_apart() -> None:
    markdown = _markdown(ROLES)
    assert "<" not in markdown
    assert "| Role | Responsibilities |" in markdown
    assert (
        "| Head of Security | • Defines and runs the security program "
        "• Owns the risk register |" in markdown
    )
    assert markdown.rstrip().endswith("After the table.")


def test_inline_html_becomes_markdown_and_code_examples_stay_as_written() -> None:
    text = (
        "A <strong>firm</strong> rule: <span class='x'>ask</span> first.<br>"
        'See <a href="https://example.com/p">the page</a>.\n\n'
        "```html\n<table><tr><td>example</td></tr></table>\n```\n"
    )
    markdown = _markdown(text)
    assert "A **firm** rule: ask first.\nSee [the page](https://example.com/p)." in markdown
    assert "```html\n<table><tr><td>example</td></tr></table>\n```" in markdown


def test_a_table_left_open_converts_at_the_end_and_is_kept_before_more_markdown() -> None:
    at_end = _markdown(
        "Versions:\n\n<table>\n<tr><th>Version</th><th>Date</th></tr>\n"
        "<tr><td>1.1</td><td>2023-05-31</td></tr>\n"
    )
    assert "| 1.1 | 2023-05-31 |" in at_end and "<t" not in at_end
    before_text = "<table><tr><td>a</td><td>b</td></tr>\n\nMore text here.\n"
    kept = _markdown(before_text)
    assert "<table><tr><td>a</td><td>b</td></tr>" in kept and "More text here." in kept


def test_a_line_break_inside_a_markdown_table_row_keeps_the_row_whole() -> None:
    text = "| Case | Approval |\n| --- | --- |\n| Outside band<BR><BR>(bonuses) | VP |\n"
    assert "| Outside band (bonuses) | VP |" in _markdown(text).replace("  ", " ")


def test_an_html_image_is_a_markdown_image_and_a_player_a_link() -> None:
    """Docs tools export screenshots as `<img>` and walkthroughs as `<iframe>`; their
    attributes were searched as words and shown in answers."""
    text = (
        'Request access in Entitle.\n\n<img src="https://cdn.example.com/shot%201.png" '
        'alt="example Cloudflare request" width="500" height="500">\n\n'
        "<IMG alt='no source' width=3>\n\n"
        '<iframe src="https://www.loom.com/embed/abc" title="Access review walkthrough" '
        'frameborder="0" allowfullscreen></iframe>\n\n<iframe src="https://v.example.com/1">'
        "</iframe>\n\nYou will get a notification."
    )
    markdown = _markdown(text)
    assert "<" not in markdown and "width" not in markdown
    assert "![example Cloudflare request](https://cdn.example.com/shot%201.png)" in markdown
    assert "no source" not in markdown
    assert "[Access review walkthrough](https://www.loom.com/embed/abc)" in markdown
    assert "[Embedded content](https://v.example.com/1)" in markdown
    assert markdown.rstrip().endswith("You will get a notification.")
