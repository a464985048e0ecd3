"""A report page in a real browser: headless Chromium (Debian's chromium and chromium-driver, driven by
selenium) loads the page, a click on a composite opens its panel, the stage selector switches the
drawing, and the console stays empty (no script error, no blocked resource, no injected script).

Under CI (the CI variable set, as .ci/run does) a missing browser, driver or selenium fails the test; a
local run without them skips, saying which is missing.
"""
import shutil

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel.compiler import compile_graph, options_from_context
from graphkernel.tools.demo import NetCompositeFuse
from ir import GraphBuilder
from requires import missing_dot, require

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>\"'"


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium, or the [test] extra)"
    if not any(shutil.which(b) for b in BROWSERS):
        return "no Chromium (Debian: apt-get install chromium chromium-driver)"
    if shutil.which("chromedriver") is None:
        return "no chromedriver (Debian: apt-get install chromium-driver)"
    return missing_dot()


@pytest.fixture(scope="module")
def browser():
    require(_missing())
    from selenium import webdriver
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.binary_location = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    yield driver
    driver.quit()


def visible(driver, selector):
    from selenium.webdriver.common.by import By
    return [e for e in driver.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()]


def load(driver, path):
    driver.get("file://" + str(path))
    driver.get_log("browser")   # start from an empty log
    driver.refresh()


def test_a_click_on_a_composite_opens_its_primitives(browser, tmp_path):
    from selenium.webdriver.support.ui import Select
    context.reset_graph_id()
    context.set_context(device_target="Ascend", enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path), graph_kernel_flags="--dump_as_html")
    NetCompositeFuse().compile(Tensor(np.ones((4, 4), np.float32)))
    load(browser, tmp_path / "report_0.html")
    # the page opens on the composite stage; nothing is open yet
    assert [s.get_attribute("data-stage") for s in visible(browser, "section.stage")] == ["composite"]
    assert visible(browser, "#detail > section") == [] and visible(browser, "#hint")
    (cluster,) = visible(browser, "g.cluster[role=button]")
    cluster.find_element("css selector", "text").click()    # its title, as a person would
    (panel,) = visible(browser, "#detail > section")
    text = panel.text
    assert text.startswith("Fused_Mul_Add_Pow_0") and "6 primitives" in text
    for member in ("Default/Mul-op0", "Default/Add-op1", "Default/Pow-op2"):
        assert member in text
    assert "launch 0: kernel Fused_Mul_Add_Pow_" in text and "fusion log: 2 entries naming it" in text
    assert "selected" in cluster.get_attribute("class") and not visible(browser, "#hint")
    # the selector steps back to the validated graph: no composite there, the panel closes
    Select(browser.find_element("id", "stage")).select_by_index(0)
    assert [s.get_attribute("data-stage") for s in visible(browser, "section.stage")] == ["validate"]
    assert visible(browser, "#detail > section") == [] and visible(browser, "g.cluster[role=button]") == []
    # the kernel graph's launch opens its kernel
    browser.find_element("id", "next").click()
    Select(browser.find_element("id", "stage")).select_by_visible_text("kernel_graph_0.dot")
    (launch,) = visible(browser, "g.node[role=button]")
    launch.click()
    (panel,) = visible(browser, "#detail > section")
    assert panel.get_attribute("id") == "launch-0" and "block_dim 1" in panel.text
    assert browser.get_log("browser") == []


def test_a_hostile_name_runs_nothing_and_logs_nothing(browser, tmp_path):
    b = GraphBuilder(namer=lambda op: f"{HOSTILE}/{op}")
    x = b.input((4, 4), name=HOSTILE)
    context.reset_graph_id()
    context.set_context(device_target="Ascend", enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path), graph_kernel_flags="--dump_as_html")
    compile_graph(b.graph(b.op("Exp", b.op("Mul", x, x))), options_from_context())
    load(browser, tmp_path / "report_0.html")
    (cluster,) = visible(browser, "g.cluster[role=button]")
    cluster.find_element("css selector", "text").click()
    (panel,) = visible(browser, "#detail > section")
    assert f"{HOSTILE}/Mul" in panel.text          # the name shown as the text it is
    assert browser.find_elements("css selector", "img") == []
    assert len(browser.find_elements("css selector", "script")) == 1
    assert browser.get_log("browser") == []
    load(browser, tmp_path / "index.html")
    assert browser.find_element("css selector", "a").text == "report_0.html"
    assert browser.get_log("browser") == []
