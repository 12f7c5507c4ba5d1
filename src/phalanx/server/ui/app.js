// The Phalanx web view: jobs, a job's page (live timeline, conditions, pods, events, following logs),
// queues (with why each waiting job waits) and nodes, all read from the Kubernetes API through watches.
"use strict";

const JOB_KINDS = [["PyTorchJob", "pytorchjobs"], ["TFJob", "tfjobs"], ["XGBoostJob", "xgboostjobs"],
                   ["PaddleJob", "paddlejobs"], ["JAXJob", "jaxjobs"], ["MPIJob", "mpijobs"]];
const KF = "/apis/kubeflow.org/v1";
const VC = "/apis/scheduling.volcano.sh/v1beta1";
const JOB_NAME_LABEL = "training.kubeflow.org/job-name";
const DESERVED = "phalanx.dev/deserved";
const RETRY_MS = 1000;  // after a failed request, before the watch is opened again

let csrf = null;
let current = null;  // the shown view's AbortController: leaving a view ends its watches and streams

// ---------------------------------------------------------------- DOM

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(headers, rows, empty) {
  const head = el("tr", {}, headers.map(h => el("th", {class: h.endsWith("#") ? "num" : null},
                                                    h.replace(/#$/, ""))));
  const body = rows.length ? rows : [el("tr", {}, el("td", {colspan: headers.length, class: "muted"}, empty))];
  return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
}

function replace(container, ...children) {
  container.replaceChildren(...children.flat().filter(c => c !== null && c !== undefined));
}

function stateSpan(text) {
  return el("span", {class: "state " + String(text || "").replace(/[^A-Za-z]/g, "")}, text || "—");
}

// ---------------------------------------------------------------- time and quantities

function age(ts) {
  if (!ts) return "";
  let s = Math.max(0, Math.floor((Date.now() - Date.parse(ts)) / 1000));
  if (s < 120) return s + "s";
  const m = Math.floor(s / 60);
  if (m < 10) return m + "m" + (s % 60 ? (s % 60) + "s" : "");
  if (m < 180) return m + "m";
  const h = Math.floor(m / 60);
  if (h < 48) return h + "h" + (m % 60 ? (m % 60) + "m" : "");
  return Math.floor(h / 24) + "d";
}

const SUFFIX = {n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
                Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60};

function quantity(q) {  // a Kubernetes quantity as a number (cpu in cores, memory in bytes)
  if (q === undefined || q === null) return 0;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(q).trim());
  if (!m || !(m[2] in SUFFIX)) return 0;
  return parseFloat(m[1]) * SUFFIX[m[2]];
}

function showQuantity(name, v) {
  if (name === "cpu") return (Math.round(v * 1000) / 1000).toString();
  if (name === "memory" || name.endsWith("storage")) {
    for (const [s, f] of [["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]]) {
      if (v >= f) return (Math.round(v / f * 10) / 10) + s;
    }
  }
  return String(Math.round(v * 1000) / 1000);
}

function resources(list) {
  const entries = Object.entries(list || {});
  return entries.length ? entries.map(([k, v]) => `${k}: ${showQuantity(k, quantity(v))}`).join(", ") : "—";
}

// ---------------------------------------------------------------- the API

function live(ok, text) {
  const e = document.getElementById("live");
  e.className = "live " + (ok ? "ok" : "down");
  e.textContent = text;
}

async function api(path, opts) {
  const o = opts || {};
  const r = await fetch(path, {...o, credentials: "same-origin", cache: "no-store",
                               headers: {"X-CSRF-Token": csrf || "", Accept: "application/json", ...(o.headers || {})}});
  if (r.status === 401) { loggedOut(); throw new Error("the web session has ended"); }
  return r;
}

const delay = (ms, signal) => new Promise(resolve => {
  const t = setTimeout(resolve, ms);
  signal && signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, {once: true});
});

async function* lines(response) {  // the lines of a streamed body, as they arrive
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) { yield buf.slice(0, i); buf = buf.slice(i + 1); }
  }
  if (buf) yield buf;
}

// An informer: list, then watch from the list's resourceVersion; a 410 or ERROR lists again. onChange
// gets the Map of objects (namespace/name -> object) after the list and after each batch of events.
async function watch(path, query, onChange, signal) {
  const items = new Map();
  const key = o => (o.metadata.namespace || "") + "/" + o.metadata.name;
  while (!signal.aborted) {
    try {
      const r = await api(path + "?" + new URLSearchParams(query), {signal});
      if (!r.ok) throw new Error(`${path}: ${r.status}`);
      const list = await r.json();
      items.clear();
      for (const o of list.items || []) items.set(key(o), o);
      onChange(items);
      let rv = list.metadata.resourceVersion;
      live(true, "live");
      for (let relist = false; !relist && !signal.aborted;) {
        const q = new URLSearchParams({...query, watch: "1", resourceVersion: rv, allowWatchBookmarks: "true"});
        const w = await api(path + "?" + q, {signal});
        if (!w.ok) break;
        for await (const line of lines(w)) {
          if (!line.trim()) continue;
          const ev = JSON.parse(line);
          if (ev.type === "ERROR") { relist = true; break; }
          rv = (ev.object.metadata && ev.object.metadata.resourceVersion) || rv;
          if (ev.type === "BOOKMARK") continue;
          if (ev.type === "DELETED") items.delete(key(ev.object)); else items.set(key(ev.object), ev.object);
          onChange(items);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      live(false, "reconnecting");
      await delay(RETRY_MS, signal);
    }
  }
}

function debounce(fn, ms) {
  let t = null;
  return () => { clearTimeout(t); t = setTimeout(fn, ms); };
}

// ---------------------------------------------------------------- jobs

function jobState(job) {
  const conds = (job.status && job.status.conditions) || [];
  return conds.length ? conds[conds.length - 1].type : "";
}

function jobQueue(job) {
  const sp = ((job.spec || {}).runPolicy || {}).schedulingPolicy || {};
  return sp.queue || "default";
}

function jobLink(kind, plural, o) {
  return el("a", {href: `#/job/${o.metadata.namespace}/${plural}/${o.metadata.name}`}, o.metadata.name);
}

function jobsView(main, signal) {
  const byKind = new Map();
  const tbody = el("div");
  const draw = () => {
    const rows = [];
    for (const [kind, plural] of JOB_KINDS) {
      for (const o of (byKind.get(kind) || new Map()).values()) rows.push([kind, plural, o]);
    }
    rows.sort((a, b) => (b[2].metadata.creationTimestamp || "").localeCompare(a[2].metadata.creationTimestamp || "")
                        || a[2].metadata.name.localeCompare(b[2].metadata.name));
    replace(tbody, table(["Name", "Namespace", "Kind", "State", "Age", "Queue", "Restarts#"], rows.map(([k, p, o]) =>
      el("tr", {"data-job": `${o.metadata.namespace}/${k}/${o.metadata.name}`},
         el("td", {}, jobLink(k, p, o)), el("td", {}, o.metadata.namespace), el("td", {}, k),
         el("td", {class: "job-state"}, stateSpan(jobState(o))), el("td", {}, age(o.metadata.creationTimestamp)),
         el("td", {}, jobQueue(o)), el("td", {class: "num"}, String((o.status || {}).restartCount || 0)))),
      "No jobs yet: phalanx run JOB.yaml, or kubectl apply -f JOB.yaml"));
  };
  replace(main, el("h1", {}, "Jobs"), tbody);
  draw();
  for (const [kind, plural] of JOB_KINDS) {
    watch(`${KF}/${plural}`, {}, items => { byKind.set(kind, items); draw(); }, signal);
  }
  const ticker = setInterval(draw, 5000);  // ages only: the data comes from the watches
  signal.addEventListener("abort", () => clearInterval(ticker));
}

function podStatus(pod) {  // what kubectl get pods shows in STATUS
  const st = pod.status || {};
  if (pod.metadata.deletionTimestamp) return "Terminating";
  let reason = st.reason || st.phase || "Pending";
  for (const cs of st.containerStatuses || []) {
    const s = cs.state || {};
    if (s.waiting && s.waiting.reason) reason = s.waiting.reason;
    else if (s.terminated) reason = s.terminated.reason || (s.terminated.exitCode ? "Error" : "Completed");
  }
  return reason;
}

function podRestarts(pod) {
  return ((pod.status || {}).containerStatuses || []).reduce((n, cs) => n + (cs.restartCount || 0), 0);
}

function jobView(main, signal, [ns, plural, name]) {
  const kind = (JOB_KINDS.find(([, p]) => p === plural) || [plural])[0];
  let job = null;
  let pods = new Map();
  let events = new Map();
  const head = el("div"), conds = el("div"), podsBox = el("div"), eventsBox = el("div");
  const timeline = el("div", {class: "timeline", id: "timeline"}, el("span", {class: "muted"}, "Loading timeline…"));
  const logSelect = el("select", {id: "log-source"});
  const logBox = el("pre", {class: "log", id: "log"});
  replace(main, head, el("h2", {}, "Timeline"), timeline, el("h2", {}, "Conditions"), conds,
          el("h2", {}, "Pods"), podsBox, el("h2", {}, "Logs"),
          el("div", {class: "toolbar"}, el("label", {for: "log-source"}, "Follow "), logSelect), logBox,
          el("h2", {}, "Events"), eventsBox);

  const refreshTimeline = debounce(async () => {
    if (!job) return;
    try {
      const r = await api(`/ui/api/timeline/${ns}/${plural}/${name}?uid=${encodeURIComponent(job.metadata.uid)}`,
                          {signal, headers: {Accept: "image/svg+xml"}});
      if (!r.ok) { replace(timeline, el("span", {class: "muted"}, "No timeline recorded yet.")); return; }
      const doc = new DOMParser().parseFromString(await r.text(), "image/svg+xml");
      const svg = doc.documentElement;
      if (svg.nodeName === "svg") replace(timeline, document.importNode(svg, true));
    } catch (e) { /* the view was left, or the session ended */ }
  }, 300);

  const drawJob = () => {
    if (!job) {
      replace(head, el("h1", {}, `${kind} ${ns}/${name}`), el("p", {class: "muted"}, "Not found (yet)."));
      return;
    }
    const st = job.status || {};
    replace(head, el("h1", {}, `${kind} ${ns}/${name} `, stateSpan(jobState(job))),
            el("p", {class: "muted"}, `queue ${jobQueue(job)} · age ${age(job.metadata.creationTimestamp)} · ` +
                                      `restarts ${st.restartCount || 0}`));
    replace(conds, table(["Type", "Status", "Reason", "Message", "Last transition"], (st.conditions || []).map(c =>
      el("tr", {}, el("td", {}, stateSpan(c.type)), el("td", {}, c.status), el("td", {}, c.reason || ""),
         el("td", {class: "reason"}, c.message || ""), el("td", {}, c.lastTransitionTime || ""))), "No conditions yet."));
  };
  const drawPods = () => {
    const list = [...pods.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name, "en", {numeric: true}));
    replace(podsBox, table(["Name", "Status", "Restarts#", "Node", "Age"], list.map(p =>
      el("tr", {"data-pod": p.metadata.name}, el("td", {}, p.metadata.name), el("td", {}, stateSpan(podStatus(p))),
         el("td", {class: "num"}, String(podRestarts(p))), el("td", {}, (p.spec || {}).nodeName || ""),
         el("td", {}, age(p.metadata.creationTimestamp)))), "No pods."));
    const have = new Set([...logSelect.options].map(o => o.value));
    for (const p of list) {
      if (!have.has(p.metadata.name)) logSelect.append(el("option", {value: p.metadata.name}, "pod " + p.metadata.name));
    }
  };
  const drawEvents = () => {
    const mine = [...events.values()].filter(e => {
      const n = (e.involvedObject || {}).name || "";
      return n === name || pods.has(ns + "/" + n) || n.startsWith(name + "-");
    }).sort((a, b) => (a.lastTimestamp || a.eventTime || "").localeCompare(b.lastTimestamp || b.eventTime || ""));
    replace(eventsBox, table(["Last seen", "Type", "Reason", "Object", "Message", "Count#"], mine.map(e =>
      el("tr", {}, el("td", {}, age(e.lastTimestamp || e.eventTime) + " ago"), el("td", {}, e.type),
         el("td", {}, e.reason), el("td", {}, `${(e.involvedObject || {}).kind}/${(e.involvedObject || {}).name}`),
         el("td", {class: "reason"}, e.message || ""), el("td", {class: "num"}, String(e.count || 1)))),
      "No events."));
  };

  let logAbort = null;
  const follow = async () => {
    if (logAbort) logAbort.abort();
    logAbort = new AbortController();
    const mine = logAbort;
    signal.addEventListener("abort", () => mine.abort(), {once: true});
    logBox.textContent = "";
    const source = logSelect.value;
    const path = source === "" ? `${KF}/namespaces/${ns}/${plural}/${name}/log?follow=true`
                               : `/api/v1/namespaces/${ns}/pods/${source}/log?follow=true&tailLines=2000`;
    try {
      const r = await api(path, {signal: mine.signal, headers: {Accept: "text/plain"}});
      if (!r.ok) { logBox.textContent = `(no log: ${r.status})`; return; }
      for await (const line of lines(r)) {
        const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
        logBox.append(line + "\n");
        if (atEnd) logBox.scrollTop = logBox.scrollHeight;
      }
      logBox.append(el("span", {class: "muted"}, "(end of log)\n"));
    } catch (e) { /* another source was chosen, or the view was left */ }
  };
  logSelect.append(el("option", {value: ""}, "all pods of the job"));
  logSelect.addEventListener("change", follow);

  drawJob(); drawPods(); drawEvents();
  watch(`${KF}/namespaces/${ns}/${plural}`, {fieldSelector: `metadata.name=${name}`}, items => {
    job = items.get(ns + "/" + name) || null;
    drawJob(); refreshTimeline();
  }, signal);
  watch(`/api/v1/namespaces/${ns}/pods`, {labelSelector: `${JOB_NAME_LABEL}=${name}`}, items => {
    pods = items; drawPods(); drawEvents(); refreshTimeline();
  }, signal);
  watch(`/api/v1/namespaces/${ns}/events`, {}, items => { events = items; drawEvents(); refreshTimeline(); }, signal);
  follow();
}

// ---------------------------------------------------------------- queues

function waitingReason(pg) {
  const st = pg.status || {};
  const conds = (st.conditions || []).filter(c => c.status === "True");
  const unsched = conds.filter(c => c.type === "Unschedulable").pop();
  if (unsched) return `${unsched.reason || "Unschedulable"}: ${unsched.message || ""}`;
  if (st.phase === "Inqueue") return "admitted to the queue; waiting for every pod of the gang to be placed";
  return "waiting for admission to the queue (enqueue)";
}

function queuesView(main, signal) {
  let queues = new Map(), groups = new Map();
  const box = el("div");
  replace(main, el("h1", {}, "Queues"), box);
  const draw = () => {
    const qs = [...queues.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const waiting = [...groups.values()].filter(g => ["Pending", "Inqueue", ""].includes((g.status || {}).phase || ""));
    const rows = qs.map(q => {
      const spec = q.spec || {}, st = q.status || {};
      let deserved = spec.deserved;
      try { deserved = deserved || JSON.parse((q.metadata.annotations || {})[DESERVED] || "null"); } catch (e) { /* none */ }
      return el("tr", {"data-queue": q.metadata.name}, el("td", {}, q.metadata.name), el("td", {}, stateSpan(st.state || "Open")),
                el("td", {class: "num"}, String(spec.weight || 1)), el("td", {}, resources(spec.capability)),
                el("td", {}, resources(deserved)), el("td", {}, resources(st.allocated)),
                el("td", {class: "num"}, String(st.running || 0)), el("td", {class: "num"}, String(st.inqueue || 0)),
                el("td", {class: "num"}, String(st.pending || 0)));
    });
    const wrows = waiting.sort((a, b) => (a.metadata.creationTimestamp || "").localeCompare(b.metadata.creationTimestamp || ""))
      .map(g => {
        const owner = (g.metadata.ownerReferences || []).find(r => r.controller) || {};
        const kp = JOB_KINDS.find(([k]) => k === owner.kind);
        const job = kp ? el("a", {href: `#/job/${g.metadata.namespace}/${kp[1]}/${owner.name}`}, `${owner.kind}/${owner.name}`)
                       : (owner.kind ? `${owner.kind}/${owner.name}` : "—");
        return el("tr", {"data-podgroup": `${g.metadata.namespace}/${g.metadata.name}`},
                  el("td", {}, (g.spec || {}).queue || "default"), el("td", {}, job),
                  el("td", {}, `${g.metadata.namespace}/${g.metadata.name}`), el("td", {}, stateSpan((g.status || {}).phase || "Pending")),
                  el("td", {class: "num"}, String((g.spec || {}).minMember || 0)), el("td", {}, resources((g.spec || {}).minResources)),
                  el("td", {class: "reason waiting-reason"}, waitingReason(g)), el("td", {}, age(g.metadata.creationTimestamp)));
      });
    replace(box, table(["Name", "State", "Weight#", "Capability", "Deserved", "Allocated", "Running#", "Inqueue#",
                        "Pending#"], rows, "No queues."),
            el("h2", {}, "Waiting jobs"),
            table(["Queue", "Job", "PodGroup", "Phase", "minMember#", "minResources", "Why it waits", "Waiting"],
                  wrows, "No job is waiting."));
  };
  draw();
  watch(`${VC}/queues`, {}, items => { queues = items; draw(); }, signal);
  watch(`${VC}/podgroups`, {}, items => { groups = items; draw(); }, signal);
}

// ---------------------------------------------------------------- nodes

function requests(pod) {
  const sum = {};
  for (const c of (pod.spec || {}).containers || []) {
    for (const [k, v] of Object.entries(((c.resources || {}).requests) || {})) sum[k] = (sum[k] || 0) + quantity(v);
  }
  return sum;
}

function nodesView(main, signal) {
  let nodes = new Map(), pods = new Map();
  const box = el("div");
  replace(main, el("h1", {}, "Nodes"), box);
  const usage = (used, total, name) => el("span", {},
    el("span", {class: "bar"}, el("span", {style: `width:${total ? Math.min(100, 100 * used / total) : 0}%`})),
    `${showQuantity(name, used)} / ${showQuantity(name, total)}`);
  const draw = () => {
    const alloc = new Map();
    const count = new Map();
    for (const p of pods.values()) {
      const n = (p.spec || {}).nodeName;
      const phase = (p.status || {}).phase;
      if (!n || phase === "Succeeded" || phase === "Failed") continue;
      const a = alloc.get(n) || {};
      for (const [k, v] of Object.entries(requests(p))) a[k] = (a[k] || 0) + v;
      alloc.set(n, a);
      count.set(n, (count.get(n) || 0) + 1);
    }
    const rows = [...nodes.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)).map(n => {
      const cap = (n.status || {}).allocatable || (n.status || {}).capacity || {};
      const a = alloc.get(n.metadata.name) || {};
      const ready = ((n.status || {}).conditions || []).find(c => c.type === "Ready");
      const gpuKey = Object.keys(cap).find(k => k.endsWith("/gpu"));
      return el("tr", {"data-node": n.metadata.name}, el("td", {}, n.metadata.name),
                el("td", {}, stateSpan(ready && ready.status === "True" ? "Ready" : "NotReady")),
                el("td", {}, usage(a.cpu || 0, quantity(cap.cpu), "cpu")),
                el("td", {}, usage(a.memory || 0, quantity(cap.memory), "memory")),
                el("td", {}, gpuKey ? usage(a[gpuKey] || 0, quantity(cap[gpuKey]), gpuKey) : "—"),
                el("td", {class: "num"}, `${count.get(n.metadata.name) || 0} / ${cap.pods || "—"}`));
    });
    replace(box, table(["Name", "Status", "CPU requested", "Memory requested", "GPUs", "Pods#"], rows, "No nodes."));
  };
  draw();
  watch("/api/v1/nodes", {}, items => { nodes = items; draw(); }, signal);
  watch("/api/v1/pods", {}, items => { pods = items; draw(); }, signal);
}

// ---------------------------------------------------------------- routing and the session

function loggedOut() {
  if (current) current.abort();
  live(false, "logged out");
  document.getElementById("logout").hidden = true;
  replace(document.getElementById("view"), el("div", {class: "notice", id: "logged-out"},
    el("h1", {}, "Not logged in"),
    el("p", {}, "Run ", el("code", {}, "phalanx ui"), " in a terminal: it prints (and opens) a one-time login link.")));
}

function route() {
  if (!csrf) return;
  if (current) current.abort();
  current = new AbortController();
  const parts = (location.hash.replace(/^#\/?/, "") || "jobs").split("/").map(decodeURIComponent);
  const main = document.getElementById("view");
  const views = {jobs: jobsView, job: jobView, queues: queuesView, nodes: nodesView};
  const view = views[parts[0]] || jobsView;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === (parts[0] === "job" ? "jobs" : parts[0]));
  }
  view(main, current.signal, parts.slice(1));
}

async function start() {
  document.getElementById("logout").addEventListener("click", async () => {
    await api("/ui/logout", {method: "POST"}).catch(() => null);
    csrf = null;
    loggedOut();
  });
  try {
    const r = await fetch("/ui/session", {credentials: "same-origin", cache: "no-store"});
    if (!r.ok) { loggedOut(); return; }
    const s = await r.json();
    csrf = s.csrf;
    document.getElementById("user").textContent = s.user;
    document.getElementById("logout").hidden = false;
  } catch (e) { loggedOut(); return; }
  window.addEventListener("hashchange", route);
  route();
}

start();
