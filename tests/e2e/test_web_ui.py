"""The web view in a real headless Chromium (Debian's, driven by Selenium): the one-time login link of
`phalanx ui`, the jobs list following a job to Succeeded, a job page's timeline and a log line arriving
live, the queue page saying why a job waits, the nodes' allocation, and the API refusing a
cookie-authenticated write without the CSRF token. Screenshots go to $PHALANX_SCREENSHOTS
(default build/screenshots)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.test_cli_controlplane import PHALANX, cli, job_file, wait_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("PHALANX_SCREENSHOTS") or ROOT / "build" / "screenshots")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT = 30


@pytest.fixture
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--ignore-certificate-errors"):
        opts.add_argument(flag)
    opts.set_capability("acceptInsecureCerts", True)  # the control plane's own CA signs its certificate
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def shot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(SHOTS / f"{name}.png"))


def text_of(driver, css: str) -> str:
    """The element's text now; "" when there is none, or it was replaced while being read (the page
    redraws its tables on every watch event)."""
    try:
        found = driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""
    except StaleElementReferenceException:
        return ""


def wait_text(driver, css: str, predicate, what: str, timeout: float = WAIT) -> str:
    WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: predicate(text_of(d, css)),
                                                            f"{what} (last: {text_of(driver, css)!r})")
    return text_of(driver, css)


def login_link(env) -> str:
    out = cli(env, "ui", "--no-open").stdout
    links = [w for w in out.split() if w.startswith("https://")]
    assert len(links) == 1, out
    return links[0]


def ticker_job(tmp_path: Path, name: str, ticks: int, queue: str | None = None, cpu: str = "1") -> Path:
    """A one-Master PyTorchJob printing ``tick i`` once a second."""
    doc = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {
               "spec": {"containers": [{"name": "pytorch", "image": "python:3.11",
                                        "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                                        "command": ["sh", "-c", f"for i in $(seq 1 {ticks}); do echo tick $i; "
                                                                "sleep 1; done"]}]}}}}}}
    if queue:
        doc["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": queue}}
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def test_web_view_in_a_real_browser(env, tmp_path, browser):
    d = browser
    api = json.loads((Path(env["PHALANX_HOME"]) / "api.json").read_text())
    token = api["token"]

    # Before login: the page says how to get in, and reads nothing.
    d.get(api["url"] + "/ui/")
    wait_text(d, "#logged-out", lambda t: "phalanx ui" in t, "the logged-out notice")

    # The one-time link: it logs in, leaves no ticket in the address bar, and fails the second time.
    link = login_link(env)
    assert token not in link and "ticket=" in link
    d.get(link)
    WebDriverWait(d, WAIT).until(lambda d: d.current_url.split("#")[0].endswith("/ui/"),
                                 f"the page after login (at {d.current_url})")
    assert "ticket" not in d.current_url and token not in d.current_url
    cookies = {c["name"]: c for c in d.get_cookies()}
    session = cookies["__Host-phalanx-session"]
    assert session["httpOnly"] and session["secure"] and session["sameSite"] == "Strict"
    assert "phalanx-session" not in d.execute_script("return document.cookie")  # HttpOnly: no script reads it
    wait_text(d, "#user", lambda t: t == "admin", "the signed-in user")

    # The jobs list follows a job from Running to Succeeded with no reload.
    d.execute_script("window.__sameDocument = true")
    cli(env, "apply", "-f", str(job_file(tmp_path, 3)))
    row = 'tr[data-job="default/PyTorchJob/pytest"] .job-state'
    wait_text(d, row, lambda t: t == "Running", "the job Running in the list", 60)
    shot(d, "jobs")
    wait_text(d, row, lambda t: t == "Succeeded", "the job Succeeded in the list", 60)
    assert d.execute_script("return window.__sameDocument") is True
    assert token not in d.page_source

    # A job page: the timeline of a running job, and its log lines arriving while the page is open.
    cli(env, "apply", "-f", str(ticker_job(tmp_path, "ticker", 8)))
    wait_cli(env, ["get", "pods"], lambda out: "ticker-master-0" in out and "Running" in out, 60, "ticker running")
    d.get(api["url"] + "/ui/#/job/default/pytorchjobs/ticker")
    wait_text(d, "#log", lambda t: "tick 1" in t, "the first log line")
    seen_at_open = text_of(d, "#log")
    assert "tick 8" not in seen_at_open
    wait_text(d, "#log", lambda t: "tick 8" in t, "a later log line arriving live")
    WebDriverWait(d, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, '#timeline svg g.pod[data-pod="ticker-master-0"] rect.seg'),
                                 "the pod's bar in the timeline")
    wait_text(d, "h1 .state", lambda t: t == "Succeeded", "the job page's state")
    WebDriverWait(d, WAIT).until(lambda d: d.find_elements(
        By.CSS_SELECTOR, '#timeline svg g.band.job rect[data-state="Succeeded"]'), "the timeline's Succeeded band")
    states = [e.get_attribute("data-state") for e in d.find_elements(
        By.CSS_SELECTOR, '#timeline svg g.pod[data-pod="ticker-master-0"] rect.seg')]
    assert "Running" in states and states[-1] == "Completed", states
    conds = text_of(d, "main")
    assert "JobSucceeded" in conds or "PyTorchJobSucceeded" in conds
    shot(d, "job")

    # The queue page: a job too big for its queue waits, and the page says why, as the PodGroup does.
    subprocess.run([*PHALANX, "apply", "-f", "-"], env=env, check=True, capture_output=True, text=True, input=yaml.safe_dump(
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "small"},
         "spec": {"weight": 1, "capability": {"cpu": "1"}}}))
    cli(env, "apply", "-f", str(ticker_job(tmp_path, "big", 2, queue="small", cpu="2")))
    d.get(api["url"] + "/ui/#/queues")
    reason_css = 'tr[data-podgroup="default/big"] .waiting-reason'
    wait_text(d, reason_css, lambda t: 'queue "small"' in t, "the waiting job's reason", 60)
    pg = json.loads(cli(env, "get", "podgroup", "big", "-o", "json").stdout)
    why = [c for c in pg["status"].get("conditions", []) if c["type"] == "Unschedulable" and c["status"] == "True"]
    assert why, pg["status"]
    wait_text(d, reason_css, lambda t: f'{why[-1]["reason"]}: {why[-1]["message"]}' in t, "the PodGroup's own words")
    assert "cpu: 1" in text_of(d, 'tr[data-queue="small"]')
    shot(d, "queues")

    # The nodes page: the node's allocation follows a running pod's requests.
    d.get(api["url"] + "/ui/#/nodes")
    node = 'tr[data-node="las1"]'
    wait_text(d, node, lambda t: "Ready" in t and "0 / 16" in t and "0 / 110" in t, "the idle node")
    cli(env, "apply", "-f", str(ticker_job(tmp_path, "hold", 120, cpu="3")))
    wait_text(d, node, lambda t: "3 / 16" in t and "1 / 110" in t, "the running pod's 3 CPUs allocated", 60)
    shot(d, "nodes")

    # The API takes the cookie only with the CSRF token: a write without it is refused and changes nothing.
    status = d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/ticker', {method: 'DELETE'})
          .then(r => done(r.status), e => done(String(e)));""")
    assert status == 403
    body = d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/v1/namespaces/default/configmaps', {method: 'POST', headers: {'Content-Type': 'application/json'},
              body: JSON.stringify({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'csrf-probe'}})})
          .then(r => r.json()).then(done, e => done(String(e)));""")
    assert body["code"] == 403 and "X-CSRF-Token" in body["message"]
    assert cli(env, "get", "pytorchjob", "ticker", check=False).returncode == 0
    assert "csrf-probe" not in cli(env, "get", "configmaps", check=False).stdout
