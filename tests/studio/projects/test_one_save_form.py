"""The file editor and the Spec tab share one save form (projects/_save_form.html): the
same fields, buttons and live validation, written once."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo

TEMPLATES = Path(settings.BASE_DIR) / "frontend" / "templates" / "projects"
SPEC_DIR = Path(settings.BASE_DIR) / "specs" / "support_triage"


def _save_form(html: str) -> str:
    forms = re.findall(r'<form method="post"[^>]*id="save-form">.*?</form>', html, re.S)
    assert len(forms) == 1, html
    return forms[0]


def _shape(form: str) -> list[str]:
    """The form's controls, in order: each field's name and type, each button's label."""
    controls = re.findall(r"<(input|textarea|button)\b([^>]*)>(?:([^<]*)</button>)?", form)
    out = []
    for tag, attrs, label in controls:
        name = re.search(r'name="([^"]+)"', attrs)
        kind = re.search(r'type="([^"]+)"', attrs)
        out.append(f"{tag}:{name.group(1) if name else ''}:{kind.group(1) if kind else ''}:{label.strip()}")
    return out


def test_it_includes_the_one_save_form_in_the_editor_and_the_spec_tab() -> None:
    for page in ("editor.html", "spec.html"):
        text = (TEMPLATES / page).read_text()
        assert '{% include "projects/_save_form.html"' in text, page
        assert 'name="content"' not in text and 'id="save-form"' not in text, page  # nothing written twice


def test_it_draws_the_same_form_on_both_pages(as_owner: Client, project: Project, repo: PackRepo) -> None:
    repo.save(
        {"spec/spec.yaml": (SPEC_DIR / "spec.yaml").read_bytes()},  # its gold is the evalset already
        base=repo.head(),
        author="Olive",
        email="olive@example.com",
        message="Add the spec",
    )
    editor = _save_form(as_owner.get("/p/triage/files/prompts/classify.txt").content.decode())
    spec = _save_form(as_owner.get("/p/triage/spec/").content.decode())
    # The spec form names its file (spec.yaml or gold.jsonl), and only the files editor can
    # save as a proposal (docs/proposals.md); otherwise the two are one form.
    propose = [c for c in _shape(editor) if c.endswith(":Save as a proposal")]
    assert len(propose) == 1 and not [c for c in _shape(spec) if c.endswith(":Save as a proposal")]
    assert [c for c in _shape(spec) if not c.startswith("input:file:")] == [
        c for c in _shape(editor) if c not in propose
    ]
    assert "input:content:" not in _shape(editor)  # the text is the textarea
    assert re.search(r'hx-post="/p/triage/[^"]*validate[^"]*"', editor)
    assert 'hx-post="/p/triage/spec/validate"' in spec
