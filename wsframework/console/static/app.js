// The EDN console page: login, then poll the JSON API of the panels this role offers and
// draw them. Vanilla JS, no framework; every text from the server goes in via textContent.
"use strict";
(function () {
  const API = "/console/api/";
  const SVG = "http://www.w3.org/2000/svg";
  const HISTORY = 120; // samples kept per chart (two minutes at one a second)
  const state = { csrf: null, features: [], timers: [], series: {} };

  const $ = (id) => document.getElementById(id);

  function setStatus(text) { $("status").textContent = text; }

  async function call(name, options) {
    const init = { credentials: "same-origin", headers: {} };
    if (options && options.body !== undefined) {
      init.method = "POST";
      init.headers["Content-Type"] = "application/json";
      if (state.csrf) init.headers["X-CSRF-Token"] = state.csrf;
      init.body = JSON.stringify(options.body);
    }
    const response = await fetch(API + name, init);
    let document_ = {};
    try { document_ = await response.json(); } catch (e) { document_ = {}; }
    if (!response.ok) {
      const error = new Error(document_.error || ("HTTP " + response.status));
      error.status = response.status;
      throw error;
    }
    return document_;
  }

  // -- login and the two views ----------------------------------------------------------------
  function show(loggedIn, session) {
    $("login").hidden = loggedIn;
    $("console").hidden = !loggedIn;
    $("logout").hidden = !loggedIn;
    state.csrf = loggedIn ? session.csrf : null;
    state.features = loggedIn ? (session.features || []) : [];
    if (session && session.role) $("role").textContent = "(" + session.role + ")";
    for (const section of document.querySelectorAll("[data-feature]")) {
      section.hidden = !state.features.includes(section.dataset.feature);
    }
    stopPolling();
    if (loggedIn) startPolling();
  }

  async function login(event) {
    event.preventDefault();
    const field = $("login-form").elements.token;
    try {
      const session = await call("login", { body: { token: field.value } });
      field.value = "";
      setStatus("logged in");
      show(true, session);
    } catch (error) {
      setStatus("login refused: " + error.message);
    }
  }

  async function logout() {
    try {
      await call("logout", { body: {} });
      setStatus("logged out");
    } catch (error) {
      setStatus("logout failed: " + error.message);
    }
    show(false, null);
  }

  function lostSession(error) {
    if (error.status === 401) {
      setStatus("session ended: log in again");
      show(false, null);
      return true;
    }
    return false;
  }

  // -- polling ------------------------------------------------------------------------------
  function every(ms, task) {
    const run = () => task().catch((error) => {
      if (!lostSession(error)) setStatus("update failed: " + error.message);
    });
    run();
    state.timers.push(setInterval(run, ms));
  }

  function startPolling() {
    const has = (f) => state.features.includes(f);
    if (has("figures")) every(1000, updateFigures);
    if (has("network")) every(2000, updateNetwork);
    if (has("topics")) every(2000, updateTopics);
    if (has("dead-letters")) every(3000, updateDeadLetters);
    if (has("summary")) every(3000, updateSummary);
  }

  function stopPolling() {
    for (const timer of state.timers) clearInterval(timer);
    state.timers = [];
  }

  // -- drawing helpers ----------------------------------------------------------------------
  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text === undefined || text === null ? "" : String(text);
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function fill(table, items, key, attribute, render) {
    const body = document.querySelector("#" + table + " tbody");
    const rows = items.map((item) => {
      const tr = document.createElement("tr");
      tr.setAttribute(attribute, String(item[key]));
      render(tr, item);
      return tr;
    });
    body.replaceChildren(...rows);
  }

  function fixed(value, digits) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(digits) : "–";
  }

  // ratios (precision, hit ratio, utilization) on a fixed 0..1 scale; the others up to their
  // largest value in view
  const FIXED_SCALE = { "precision": 1, "hit-ratio": 1, "utilization": 1 };

  function polyline(svg, values, className, scale) {
    const box = svg.viewBox.baseVal;
    const finite = values.filter((v) => typeof v === "number" && isFinite(v));
    const top = scale || Math.max(1e-9, ...finite);
    const step = box.width / Math.max(1, HISTORY - 1);
    const offset = HISTORY - values.length;
    const points = values.map((v, i) => {
      const y = box.height - (isFinite(v) ? v : 0) / top * (box.height - 4) - 2;
      return ((i + offset) * step).toFixed(1) + "," + y.toFixed(1);
    });
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", points.join(" "));
    if (className) line.setAttribute("class", className);
    return line;
  }

  function chart(name, value) {
    const series = state.series[name] || (state.series[name] = []);
    series.push(value);
    if (series.length > HISTORY) series.shift();
    const svg = $("chart-" + name);
    if (svg) svg.replaceChildren(polyline(svg, series, undefined, FIXED_SCALE[name]));
  }

  // -- panels -------------------------------------------------------------------------------
  async function updateFigures() {
    const f = await call("figures");
    const shown = {
      "events-per-second": [f.events_per_s, 1], "precision": [f.precision, 2],
      "hit-ratio": [f.hit_ratio, 3], "cpu": [f.cpu, 2], "utilization": [f.utilization, 2],
    };
    for (const [id, [value, digits]] of Object.entries(shown)) {
      $(id).textContent = fixed(value, digits);
      chart(id, value);
    }
    $("selftuning-state").textContent = f.self_tuning ? "(on)" : "(off)";
    const trace = f.trace || [];
    const svg = $("chart-selftuning");
    svg.replaceChildren(polyline(svg, trace.slice(-HISTORY).map((s) => s.precision), "steps", 1));
    fill("selftuning-trace", trace.slice(-8).reverse(), "step", "data-step", (tr, s) => {
      cell(tr, s.step, "num");
      cell(tr, fixed(s.previous, 2) + " → " + fixed(s.precision, 2));
      cell(tr, fixed(s.events_per_s, 1), "num");
      cell(tr, fixed(s.cpu, 2), "num");
      cell(tr, fixed(s.busy, 2), "num");
      cell(tr, s.signal);
      cell(tr, s.reason);
    });
  }

  async function updateNetwork() {
    const network = await call("network");
    fill("servers", network.servers, "name", "data-server", (tr, s) => {
      cell(tr, s.name);
      cell(tr, s.kind);
      cell(tr, s.address);
      cell(tr, s.up ? "up" : "down", s.up ? "up" : "down");
      cell(tr, s.queue_depth, "num");
      cell(tr, s.sent, "num");
      cell(tr, s.dropped, "num");
      cell(tr, s.failures, "num");
      cell(tr, s.load, "num");
      cell(tr, s.summary_bytes + " B, " + s.summary_rectangles + " rect.", "num");
    });
  }

  async function updateTopics() {
    const answer = await call("topics");
    fill("topics", answer.topics, "name", "data-topic", (tr, t) => {
      cell(tr, t.name);
      cell(tr, t.subscriptions, "num subscriptions");
    });
  }

  async function updateDeadLetters() {
    const answer = await call("dead-letters");
    $("dead-letter-total").textContent = "(" + answer.total + ")";
    fill("dead-letters", answer.letters, "id", "data-id", (tr, d) => {
      cell(tr, d.id, "num");
      cell(tr, d.topic);
      cell(tr, d.subscription);
      cell(tr, d.url);
      cell(tr, d.reason);
      cell(tr, d.attempts, "num");
      cell(tr, d.dead_at);
      const button = document.createElement("button");
      button.type = "button";
      button.className = "redeliver";
      button.textContent = "Redeliver";
      button.addEventListener("click", () => act("redeliver", { ids: [d.id] }));
      tr.appendChild(document.createElement("td")).appendChild(button);
    });
  }

  async function updateSummary() {
    const answer = await call("summary");
    fill("summary", Object.entries(answer.figures || {}).map(([name, value]) => ({ name, value })),
         "name", "data-figure", (tr, f) => {
           cell(tr, f.name);
           cell(tr, Number.isInteger(f.value) || typeof f.value !== "number" ? f.value
                                                                              : fixed(f.value, 3), "num");
         });
  }

  async function act(name, body) {
    try {
      const answer = await call(name, { body: body });
      setStatus(answer.message || (name + " done"));
    } catch (error) {
      if (!lostSession(error)) setStatus(name + " failed: " + error.message);
    }
    if (state.features.includes("dead-letters")) {
      updateDeadLetters().catch((error) => lostSession(error));
    }
  }

  // -- start --------------------------------------------------------------------------------
  async function start() {
    $("login-form").addEventListener("submit", login);
    $("logout").addEventListener("click", logout);
    // no confirm() dialog: it would block the page's automation; the status says what went
    $("purge-dead-letters").addEventListener("click", () => act("purge", { all: true }));
    try {
      const session = await call("session");
      show(Boolean(session.authenticated), session);
    } catch (error) {
      setStatus("console unavailable: " + error.message);
      show(false, null);
    }
  }

  document.addEventListener("DOMContentLoaded", start);
})();
