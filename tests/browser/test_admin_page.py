"""Admin page: log in, create a vocabulary, import a list with one bad line, assign it to a meeting."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

IMPORT = "heparin\nwarfarin\tlots\napixaban\t1.5\n# a comment\nlinezolid\n"


def test_vocabulary_import_and_meeting_assignment(page: object, server: object, rest: object) -> None:
    log_in(page, server.base_url, "/admin", screenshot_as="admin-login")
    page.wait_for_selector("#admin:not([hidden])")
    assert "admin" in page.inner_text("#whoami")

    page.fill("#vocab-name", "Cardiology")
    page.fill("#vocab-description", "Ward drug list")
    page.click("#vocab-create button[type=submit]")
    page.wait_for_selector("#vocab-detail-title:text-is('Cardiology')")

    page.fill("#new-term-text", "Okafor")
    assert page.locator("#new-term-weight option").all_inner_texts() == [
        "Low (0.5)", "Normal (1)", "High (1.5)", "Highest (2)"
    ]  # fmt: skip
    assert page.input_value("#new-term-weight") == "1"
    assert "Highest: " in page.inner_text("#weight-help")
    page.select_option("#new-term-weight", "2")
    page.click("#term-add")
    page.wait_for_selector("#terms-table tbody tr:has-text('Okafor')")
    okafor = page.locator("#terms-table tbody tr", has_text="Okafor")
    assert "Highest (2)" in okafor.inner_text()

    page.fill("#import-content", IMPORT)
    page.click("#import-submit")
    bad = page.locator("#import-report li.bad")
    bad.first.wait_for()
    assert bad.count() == 1
    assert bad.get_attribute("data-line") == "2"
    assert bad.locator("code").text_content() == "warfarin\tlots"
    assert "not a number" in bad.locator(".reason").inner_text()
    assert page.locator("#import-report li[data-line='1'] .reason").inner_text() == "✓ saved"
    assert page.inner_text("#import-summary").startswith("Imported 3 terms. 1 line was rejected")
    rows = page.locator("#terms-table tbody tr").all_inner_texts()
    assert [row.split("\t")[1] for row in rows] == ["Okafor", "heparin", "apixaban", "linezolid"]
    screenshot(page, "admin", full_page=True)

    vocabulary = next(
        v for v in rest.get("/api/vocabularies").json()["vocabularies"] if v["name"] == "Cardiology"
    )
    stored = rest.get(f"/api/vocabularies/{vocabulary['id']}").json()["vocabulary"]["terms"]
    assert sorted(t["text"] for t in stored) == ["Okafor", "apixaban", "heparin", "linezolid"]

    page.click("[data-tab=meetings]")
    page.fill("#meeting-title", "Cardiology ward round")
    page.select_option("#meeting-chunk", "1.12")
    page.click("#meeting-create button[type=submit]")
    row = page.locator("#meetings-table tbody tr", has_text="Cardiology ward round")
    row.wait_for()
    assert "none" in row.locator(".vocab-names").inner_text()
    row.get_by_role("button", name="Vocabularies of Cardiology ward round").click()
    page.locator(".assign-row").get_by_label("Cardiology", exact=True).check()
    page.locator(".assign-row").get_by_role("button", name="Save").click()
    page.wait_for_selector("#meetings-table .vocab-names:text-is('Cardiology')")
    row.get_by_role("button", name="Start").click()
    page.wait_for_selector("#meetings-table tbody tr .status-live")
    screenshot(page, "admin-meetings")

    meeting = next(
        m for m in rest.get("/api/meetings").json()["meetings"] if m["title"] == "Cardiology ward round"
    )
    assert meeting["vocabulary_ids"] == [vocabulary["id"]]
    assert meeting["chunk_s"] == 1.12
    assert meeting["status"] == "live"

    page.click("[data-tab=stats]")
    page.wait_for_selector("#stats-table tbody tr")
    assert page.locator("#stats-table tr.zero").count() == 4  # nothing spoken yet: every term is flagged
    screenshot(page, "admin-stats")


def test_inline_edit_delete_upload_rename_and_export(
    page: object, server: object, rest: object, tmp_path: Path
) -> None:
    created = rest.post("/api/vocabularies", json={"name": "Oncology"}).json()["vocabulary"]
    terms = [{"text": "cisplatin"}, {"text": "imatinib"}, {"text": "pembrolizumab"}]
    rest.post(f"/api/vocabularies/{created['id']}/terms", json={"terms": terms}).raise_for_status()
    log_in(page, server.base_url, "/admin")
    page.wait_for_selector("#vocab-detail-title:text-is('Oncology')")

    row = page.locator("#terms-table tbody tr", has_text="cisplatin")
    row.get_by_role("button", name="Edit").click()
    editing = page.locator("#terms-table tr.editing")
    editing.get_by_label("Written as").fill("Cisplatin")
    editing.get_by_label("Weight").select_option("1.5")
    editing.get_by_role("button", name="Save").click()
    page.wait_for_selector("#terms-table tbody tr:has-text('Cisplatin')")

    page.locator("#terms-table tbody tr", has_text="imatinib").get_by_role("button", name="Delete").click()
    page.wait_for_selector("#terms-table tbody tr:has-text('imatinib')", state="detached")

    upload = tmp_path / "more.csv"
    upload.write_text("text,weight,display,alternates\ncarboplatin,2,Carboplatin,carbo\n", encoding="utf-8")
    page.set_input_files("#import-file", str(upload))
    page.wait_for_function("document.querySelector('#import-format').value === 'csv'")
    page.click("#import-submit")
    page.wait_for_selector("#import-summary:text-is('Imported 1 term. No errors.')")
    assert page.inner_text("#import-report li[data-line='1'] .reason") == "column names"

    page.fill("#vocab-edit-name", "Oncology drugs")
    page.click("text=Save name")
    page.wait_for_selector("#vocab-list button:has-text('Oncology drugs')")

    with page.expect_download() as download:
        page.click("text=Export CSV")
    exported = Path(download.value.path()).read_text(encoding="utf-8")
    assert "carboplatin" in exported and "imatinib" not in exported

    stored = rest.get(f"/api/vocabularies/{created['id']}").json()["vocabulary"]
    assert stored["name"] == "Oncology drugs"
    by_text = {t["text"]: t for t in stored["terms"]}
    assert sorted(by_text) == ["carboplatin", "cisplatin", "pembrolizumab"]
    assert (by_text["cisplatin"]["display"], by_text["cisplatin"]["weight"]) == ("Cisplatin", 1.5)
    assert "High (1.5)" in page.locator("#terms-table tbody tr", has_text="Cisplatin").inner_text()
    assert by_text["carboplatin"]["alternates"] == ["carbo"]
